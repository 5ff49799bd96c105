"""Hooks: git's pre-commit keeps state folders legal; post-commit announces every move once.

*pre-commit* refuses a commit that leaves an artifact in two state folders or moves one along
a transition the graph does not allow, printing the rule. *post-commit* sends the configured
notification (``[artifacts] commit_event``, default status-update, to ``commit_notify`` or the
roles that act on the new state: they own a move out of it or are triggered by the event) for
every artifact the commit moved — whether ``workflow
move`` or a human's ``git mv`` + ``git commit`` made it. Each (parent, artifact, transition) is
recorded in the state dir's ``notified`` ledger, so re-running the hook or amending the commit does not
notify twice; a commit whose ``Workflow-Notify`` trailer says ``workflow move`` already notified
sends nothing. Mail that cannot be sent is queued in the outbox and flushed on the next run:
a hook never loses the user's commit.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.artifacts import transitions, trust
from workflow.artifacts.gitrepo import Repo, artifacts_in, moves
from workflow.core.config import Config
from workflow.core.errors import DeliveryError, RuleError, TransportError, WorkflowError
from workflow.core.locate import Artifact, by_key, two_folders
from workflow.delivery import outbox
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport

HOOKS = ("pre-commit", "post-commit")
MARKER = "# workflow-mail hook"


class Installed(NamedTuple):
    hook: str
    path: Path
    action: str  # "installed" | "up to date" | "installed (kept your hook as NAME)"


def script(hook: str, python: str, config_rel: str) -> str:
    """The hook file: runs a hook already there first, then ours; never blocks on a missing install."""
    return f"""#!/bin/sh
{MARKER} (installed by `workflow hooks install`; reinstalling overwrites edits).
# A hook that was here before is kept as {hook}.local and runs first.
here=$(dirname "$0")
if [ -x "$here/{hook}.local" ]; then "$here/{hook}.local" "$@" || exit $?; fi
top=$(git rev-parse --show-toplevel) || exit 0
cfg="$top/{config_rel}"
py='{python}'
# -P: the working tree (an agent's writing) never shadows the installed workflow package
if [ -x "$py" ] && "$py" -P -c 'import workflow' 2>/dev/null; then
  exec "$py" -P -m workflow --config "$cfg" hooks run {hook} "$@"
elif command -v workflow >/dev/null 2>&1; then
  exec workflow --config "$cfg" hooks run {hook} "$@"
fi
echo "workflow-mail: {hook} hook skipped: the workflow command is not installed (pip install workflow-mail)" >&2
exit 0
"""


def install(config: Config, repo: Repo) -> list[Installed]:
    """Write both hooks; idempotent (an unchanged hook file is not rewritten)."""
    cfg = config.path or (config.project_dir / "workflow.toml")
    rel = Path(os.path.relpath(cfg.resolve(), repo.top)).as_posix()
    repo.hooks_dir.mkdir(parents=True, exist_ok=True)
    out: list[Installed] = []
    for hook in HOOKS:
        path = repo.hooks_dir / hook
        text = script(hook, sys.executable, rel)
        action = "installed"
        if path.exists():
            old = path.read_text(encoding="utf-8", errors="replace")
            if old == text and os.access(path, os.X_OK):
                out.append(Installed(hook, path, "up to date"))
                continue
            if MARKER not in old:
                kept = path.with_name(f"{hook}.local")
                if kept.exists():
                    raise WorkflowError(f"{path} is not ours and {kept.name} exists too; merge them by hand")
                path.rename(kept)
                action = f"installed (your hook now runs first as {kept.name})"
        tmp = path.with_name(f".{hook}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o755)
        tmp.rename(path)
        out.append(Installed(hook, path, action))
    written = [i.path for i in out if i.action != "up to date"]
    written += [i.path.with_name(f"{i.hook}.local") for i in out if ".local" in i.action]
    project = config.project_dir.resolve()
    trust.approve(
        config, [p.resolve().relative_to(project).as_posix() for p in written if project in p.resolve().parents]
    )
    return out


def installed(repo: Repo) -> list[str]:
    """Which of our hooks are missing."""
    missing = []
    for hook in HOOKS:
        p = repo.hooks_dir / hook
        if not p.exists() or MARKER not in p.read_text(encoding="utf-8", errors="replace"):
            missing.append(hook)
    return missing


def absolutize_env() -> None:
    """Git may hand hooks relative GIT_DIR/GIT_INDEX_FILE; we run git from other directories."""
    for var in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        v = os.environ.get(var)
        if v and not os.path.isabs(v):
            os.environ[var] = os.path.abspath(v)


# ------------------------------------------------------------------ pre-commit


def pre_commit(config: Config, repo: Repo) -> list[str]:
    """Problems with the staged commit, one line each (empty: the commit may proceed)."""
    staged = repo.staged()
    problems = [
        transitions.refusal(config, m.after.path, m.before.state, m.after.state)
        for m in moves(staged, config)
        if not transitions.allowed(config, m.before.state, m.after.state)
    ]
    touched = {a.key for a in artifacts_in((c.path for c in staged if c.status != "D"), config)}
    if touched:
        index = by_key(artifacts_in(repo.tracked(None, config.artifact_roots), config))
        for key in sorted(touched):
            copies = index.get(key, [])
            if len(copies) > 1:
                problems.append(two_folders(copies))
    return problems


# ------------------------------------------------------------------ post-commit


def trailer(message: str, name: str) -> str | None:
    for line in reversed(message.strip().splitlines()):
        k, sep, v = line.partition(":")
        if sep and k.strip().lower() == name.lower():
            return v.strip()
    return None


def recipients(app: App, path: str, state: str, sender: str) -> list[str]:
    """``[artifacts] commit_notify``, else the roles that act on the new state: among the
    mail-taking roles whose artifact globs match, those that own a move out of ``state`` and
    those whose triggers include the commit event."""
    if app.config.commit_notify:
        return [r for r in app.config.commit_notify if r != sender]
    out = []
    for name in app.roster.roles:
        role = app.roster.roles[name]
        if not role.takes_mail or name == sender or not any(fnmatch.fnmatchcase(path, g) for g in role.artifacts):
            continue
        if any(src == state for src, _ in role.moves) or app.config.commit_event in role.triggers:
            out.append(name)
    return out


def _ledger_keys(config: Config) -> set[str]:
    try:
        return set(config.state.notified.read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return set()


def _record(config: Config, key: str) -> None:
    config.state.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(config.state.notified, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(key + "\n")
        f.flush()
        os.fsync(f.fileno())


def post_commit(app: App, repo: Repo, transport: Transport, say: Callable[[str], None], sha: str = "HEAD") -> int:
    """Notify every move in commit ``sha`` not yet notified; returns how many were sent or queued."""
    config = app.config
    outbox.flush(config, transport, say)
    sha = repo.git("rev-parse", sha).strip()
    found = moves(repo.committed(sha), config)
    if not found:
        return 0
    message = repo.message(sha)
    by = trailer(message, "Workflow-Notify")
    if by:
        say(f"workflow move notified ({by}); nothing more to send")
        return 0
    parent = repo.parent(sha)
    sender = _sender(app, trailer(message, "Workflow-Role"), say)
    done = _ledger_keys(config)
    count = 0
    for m in found:
        key = f"{parent} {m.after.glob} {m.before.state}->{m.after.state}"
        if key in done:
            continue
        if announce(app, m.before, m.after, sha, message, sender, transport, say):
            count += 1
        _record(config, key)
    return count


def announce(
    app: App,
    before: Artifact,
    after: Artifact,
    sha: str,
    message: str,
    sender: str,
    transport: Transport,
    say: Callable[[str], None],
) -> bool:
    """Tell of one move what every move tells (``[artifacts] commit_event`` to ``recipients``),
    whoever made it: the post-commit hook for a commit, a run's ``move_artifact`` tool (through
    the run's transport: sent when the run succeeds) — so a move tells the same people, made by the
    tool or from a run's shell. False when nobody acts on the new state or it could not be composed."""
    config = app.config
    to = recipients(app, after.path, after.state, sender)
    if not to:
        say(
            f"{after.path}: moved {before.state} → {after.state}; no role acts on {after.state}/ "
            f"(owns a move out of it, or is triggered by {config.commit_event}): nobody to notify"
        )
        return False
    subject = message.strip().splitlines()[0] if message.strip() else ""
    req = NotifyRequest(
        config.commit_event,
        (after.path,),
        tuple(to),
        sender,
        None,
        {
            "CONTEXT": f"{before.path} → {after.path} in commit {sha[:10]}: {subject}",
            "STATUS": f"moved {before.state} → {after.state}",
        },
    )
    try:
        composed = app.compose(req)
    except WorkflowError as e:
        say(f"cannot notify the move of {after.path}: {e}")
        return False
    what = f"{config.commit_event} for {after.path} ({before.state} → {after.state}) to {', '.join(to)}"
    _send(config, transport, composed.raw, composed.sender_address, composed.recipients, what, say)
    return True


def move_tells(config: Config) -> str:
    """What a move tells, said once for the prompts and the tool: the same by the tool or the shell."""
    to = ", ".join(config.commit_notify) if config.commit_notify else "the roles that act on its new state"
    return (
        f"a move sends a {config.commit_event} (informational: it wakes nobody) to {to}, "
        "when your run succeeds, whether you move by the tool or `workflow move` from the shell; "
        "an approval, rejection or other decision you still send yourself"
    )


def _sender(app: App, from_trailer: str | None, say: Callable[[str], None]) -> str:
    for candidate in (from_trailer, os.environ.get("WORKFLOW_ROLE")):
        if candidate:
            try:
                return app.roster.sender(candidate)
            except WorkflowError as e:
                say(f"sender {candidate!r} ignored: {e}")
    return app.roster.sender(app.config.default_sender)


def _send(
    config: Config,
    transport: Transport,
    raw: bytes,
    sender: str,
    to: tuple[str, ...],
    what: str,
    say: Callable[[str], None],
) -> None:
    try:
        where = transport.send(raw, sender, to)
        say(f"sent {what} ({where})")
    except RuleError as e:
        outbox.put(config, raw, sender, to, what, str(e), failed=True)
        say(f"refused {what}: {e} (kept in the outbox's failed/ for `workflow doctor`)")
    except (TransportError, DeliveryError) as e:
        outbox.put(config, raw, sender, to, what, str(e))
        say(f"warning: could not send {what}: {e}; queued, it goes out on the next commit or `workflow hooks flush`")
