"""Announce: post-commit tells of every move once, whoever made it.

It sends the configured notification (``[artifacts] commit_event``, default status-update, to
``commit_notify`` or the roles that act on the new state: they own a move out of it or are
triggered by the event) for every artifact the commit moved — whether ``workflow move`` or a
human's ``git mv`` + ``git commit`` made it. Each (parent, artifact, transition) is recorded in
the state dir's ``notified`` ledger, so re-running the hook or amending the commit does not
notify twice; a commit whose ``Workflow-Notify`` trailer says ``workflow move`` already notified
sends nothing. Mail that cannot be sent is queued in the outbox and flushed on the next run:
a hook never loses the user's commit.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable

from workflow.app import App
from workflow.artifacts.gitrepo import Repo, moves
from workflow.artifacts.hooks import ledger_key, told, trailer
from workflow.core.config import Config
from workflow.core.errors import DeliveryError, RuleError, TransportError, WorkflowError
from workflow.core.locate import Artifact
from workflow.delivery import outbox
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport


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
    done = told(config)
    count = 0
    for m in found:
        key = ledger_key(parent, m)
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
