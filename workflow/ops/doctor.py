"""Doctor: find what is out of joint between folders, git, mail, the index and locks; fix what is safe.

Each problem is one line ``CHECK: what is wrong; what to do``. Safe fixes (``--fix``): rebuild
the index from the Maildirs, remove stale locks, send queued notifications, install missing git
hooks, take other users' access to the mail root away. Everything else (an artifact in two folders, mail whose claim disagrees with git, mail
about an artifact that is gone) needs a human's decision and is only reported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

from workflow.agents import clicheck, locks
from workflow.agents.contain import choose
from workflow.agents.sandbox import status
from workflow.app import App
from workflow.artifacts import hooks, trust
from workflow.artifacts.board import mail_by_key, refs_without_artifact
from workflow.artifacts.gitrepo import Repo, artifacts_in
from workflow.artifacts.movers import last_moves, settled
from workflow.core import modes
from workflow.core.backendkinds import PROCESS
from workflow.core.config import Config
from workflow.core.errors import GitLayoutError, MailIndexError, TemplateError, WorkflowError
from workflow.core.events import DECISIONS
from workflow.core.locate import by_key, duplicates, scan, two_folders
from workflow.core.senders import who
from workflow.delivery import outbox
from workflow.delivery.credentials import load_people
from workflow.delivery.transport import make_transport
from workflow.mail.inbox import unique
from workflow.mail.index import reset
from workflow.mail.rows import Row
from workflow.mail.templates import template_path
from workflow.ops import postfix
from workflow.policy.roles import disagreements

CHECKS = (
    "two-folders",
    "claim",
    "missing-artifact",
    "index-drift",
    "stale-lock",
    "outbox",
    "hooks",
    "git",
    "containment",
    "sandbox",
    "agent-cli",
    "auth",
    "role-text",
    "templates",
    "modes",
    "trust",
    "relay",
)


class Problem(NamedTuple):
    check: str
    text: str
    fix: str | None = None  # the safe repair --fix makes, when there is one

    def line(self) -> str:
        return f"{self.check}: {self.text}"


def diagnose(app: App, now: float | None = None) -> list[Problem]:
    """Every problem found, in CHECKS order."""
    config = app.config
    now = time.time() if now is None else now
    out: list[Problem] = []
    artifacts = scan(config)
    for copies in duplicates(artifacts):
        out.append(Problem("two-folders", two_folders(copies)))
    repo, refused = _repo(config)
    try:
        with app.index() as index:
            index.refresh()  # what mail clients changed (flags, new/ to cur/) is taken in, not drift
            drift = index.drift()
            rows = index.with_artifacts()
    except MailIndexError as e:  # unreadable: nothing below can be judged until it is rebuilt
        out.append(Problem("index-drift", f"{e}".split("; run")[0], "rebuild the index (workflow reindex)"))
        return out + _the_rest(app, repo, refused)
    in_git = by_key(artifacts_in(repo.tracked("HEAD", config.artifact_roots), config)) if repo and repo.head() else {}
    worktree = by_key(artifacts)
    moved = last_moves(config, repo) if repo else {}
    for key, mail in sorted(mail_by_key(config, rows, artifacts).items()):
        claim = next((r for r in reversed(sorted(mail, key=lambda r: r.date)) if claimed(r)), None)
        where = in_git.get(key) or worktree.get(key) or []
        if claim is None or len(where) != 1 or claimed(claim) == where[0].state:
            continue
        if settled(moved.get(key), where[0].state, claim.date):
            continue  # a role's committed move, newer than the mail: the commit is the truth
        source = "git" if key in in_git else "the working tree"
        out.append(
            Problem(
                "claim",
                f"latest mail about {where[0].glob} ({claim.event or 'mail'} from {who(claim.sender, config.domain)}, "
                f"{claim.message_id}) claims {claimed(claim)}; {source} has it in {where[0].state}/ — move it, or send a "
                f"status-update claiming {where[0].state}",
            )
        )
    for ref, mail in sorted(refs_without_artifact(config, rows, artifacts).items()):
        n = len(unique(mail))
        out.append(
            Problem(
                "missing-artifact",
                f"{n} message{'s' if n != 1 else ''} name {ref}, which is in no state folder now "
                f"(latest {mail[-1].message_id}); restore it or tell the roles it is gone",
            )
        )
    for mailbox, unindexed, orphaned, changed in drift:
        parts = [
            f"{n} {what}"
            for n, what in (
                (unindexed, "files not indexed"),
                (orphaned, "rows without a file"),
                (changed, "copies moved or re-flagged"),
            )
            if n
        ]
        out.append(
            Problem("index-drift", f"mailbox {mailbox}: {', '.join(parts)}", "rebuild the index (workflow reindex)")
        )
    for info in locks.scan(config.state):
        why = locks.stale(info, config.agentd.lock_ttl, now)
        if why:
            out.append(
                Problem(
                    "stale-lock", f"{info.path} (pid {info.pid} on {info.host or '?'}): {why}", f"remove {info.path}"
                )
            )
    queued = outbox.pending(config)
    if queued:
        out.append(
            Problem(
                "outbox",
                f"{len(queued)} notification(s) queued, not yet sent (oldest: {queued[0].what}: {queued[0].error})",
                "send them now",
            )
        )
    for q in outbox.pending(config, failed=True):
        out.append(
            Problem(
                "outbox",
                f"refused notification {q.what}: {q.error}; resend it with workflow-notify, then delete {q.path}",
            )
        )
    return out + _the_rest(app, repo, refused)


def claimed(r: Row) -> str | None:
    """The state a message claims: its X-Workflow-State, or for a decision without one (a person's,
    typed in a mail client) the state the decision puts the artifact in."""
    move = DECISIONS.get(r.event or "")
    return r.state or (move[1] if move else None)


def _repo(config: Config) -> tuple[Repo | None, str]:
    """The project's repository, and why git must not run in it now ("" when it may)."""
    try:
        return Repo.find(config), ""
    except GitLayoutError as e:  # something planted where git reads or writes: named, never taken for no repository
        return None, str(e)


def _the_rest(app: App, repo: Repo | None, refused: str = "") -> list[Problem]:
    """The checks that need no index: git, hooks, containment, sandbox, auth."""
    config = app.config
    out: list[Problem] = []
    if refused:
        out.append(Problem("git", refused))
    elif repo is None:
        out.append(Problem("git", f"{config.project_dir} is not in a git repository; run `workflow init`"))
    else:
        missing = hooks.installed(repo)
        if missing:
            out.append(
                Problem("hooks", f"git hook(s) {', '.join(missing)} not installed in {repo.hooks_dir}", "install them")
            )
    out.extend(containment(app))
    sandbox = status(config)
    if not sandbox.enforced:
        out.append(Problem("sandbox", sandbox.line))
    out.extend(Problem("agent-cli", line) for line in clicheck.problems(config, app.roster, os.environ))
    if config.smtp.auth == "off":
        out.append(
            Problem(
                "auth",
                '[smtp] auth = "off": trust-the-host mode — any local process may submit as any role; '
                'set auth = "required" (the default) to bind every sender to its login',
            )
        )
    if config.smtp.auth_users_file:
        try:
            load_people(config.smtp.auth_users_file, app.roster)
        except WorkflowError as e:  # what `workflow smtpd` refuses to start on
            out.append(Problem("auth", f"[smtp] auth_users_file: {e}"))
    for name in sorted(app.roster.roles):
        out.extend(Problem("role-text", line) for line in disagreements(app.roster.roles[name]))
    out.extend(Problem("templates", line) for line in missing_templates(config))
    changed = trust.changes(config)
    if changed is None:
        out.append(Problem("trust", "the control files were never approved here: read them, then run `workflow trust`"))
    elif changed:
        out.append(
            Problem(
                "trust",
                f"changed since you last approved them: {', '.join(map(str, changed))} — "
                "read them (git diff, git log), then run `workflow trust`",
            )
        )
    for stray in trust.stray_configs(config):
        out.append(
            Problem(
                "trust",
                f"{stray}: a workflow.toml inside the project (a run's agent may have written it); commands "
                "run below it refuse it — remove it, or use it with --config if it is yours",
            )
        )
    found = modes.loose(config.mail_root)
    if found:
        some = ", ".join(str(p) for p in found[:3]) + (" …" if len(found) > 3 else "")
        out.append(
            Problem(
                "modes",
                f"{len(found)} file(s) or folder(s) under the mail root can be read by other users ({some})",
                "make them the owner's only",
            )
        )
    out.extend(Problem("relay", line) for line in postfix.problems(config))
    return out


def missing_templates(config: Config) -> list[str]:
    """Each configured event type (``[workflow] event_types``) no template renders."""
    out = []
    for event in config.event_types:
        try:
            template_path(event, config.templates_dir)
        except TemplateError:
            out.append(
                f"event type {event} ([workflow] event_types) has no template: write {config.templates_dir}/{event}.txt "
                "(see email-templates/README.md), or drop the event type"
            )
    return out


def uses_command_backend(app: App) -> bool:
    """Whether some run starts an agent CLI (the command backend or a CLI's profile)."""
    roster, config = app.roster, app.config
    process = PROCESS
    return (
        config.backend in process
        or config.agentd.backend in process
        or any(roster.roles[name].backend in process for name in roster.roles)
        or any(m.backend in process for p in config.panels for m in p.members)
    )


def containment(app: App) -> list[Problem]:
    """Whether command-backend runs are contained (only when the project has any)."""
    if not uses_command_backend(app):
        return []
    mode = choose(app.config.backends.command.contain)
    return [] if mode.complete else [Problem("containment", mode.why)]


def repair(app: App, problems: list[Problem], say: Callable[[str], None]) -> None:
    """Apply the safe fixes for these problems, saying what was done."""
    checks = {p.check for p in problems if p.fix}
    config = app.config
    if "index-drift" in checks:
        count = reset(config.index_path, app.maildirs, config.domain)
        say(f"fixed index-drift: rebuilt the index from the Maildirs ({count} messages)")
    if "stale-lock" in checks:
        for info in locks.scan(config.state):
            why = locks.stale(info, config.agentd.lock_ttl)
            if why:
                info.path.unlink(missing_ok=True)
                say(f"fixed stale-lock: removed {info.path} ({why})")
    if "outbox" in checks:
        sent, left = outbox.flush(config, make_transport(config, app.deliverer), lambda s: say(f"outbox: {s}"))
        say(f"fixed outbox: sent {sent} queued notification(s), {left} still queued")
    if "modes" in checks:
        count = modes.tighten(modes.loose(config.mail_root))
        say(f"fixed modes: made {count} file(s) or folder(s) the owner's only")
    if "hooks" in checks:
        repo, _ = _repo(config)
        if repo is not None:
            for h in hooks.install(config, repo):
                say(f"fixed hooks: {h.hook} {h.action} ({h.path})")
