"""Move: change an artifact's state with one ``git mv`` and one commit, and notify in the same step.

``workflow move user-auth todo --as spec-reviewer --reason "…" --notify spec-writer`` checks
everything first (the artifact exists once, is committed and clean, the transition is legal,
the role exists, the notification renders), then moves and commits only the artifact's two
paths (other staged work is left alone) with a message naming role, transition and reason,
authored as the role. From the checks to the commit it holds the project's git lock
(``gitlock``): concurrent moves queue, and the one that comes second sees where the first put
the artifact. Inside a run, an artifact the run itself wrote moves with its edits in one commit.
The notification is sent after the commit, so the server's state check sees the new folder;
if it cannot be sent it is queued in the outbox and the move still stands. The commit carries
a ``Workflow-Notify`` trailer so the post-commit hook does not notify a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.artifacts import edits, plumbing, transitions
from workflow.artifacts.gitlock import project_lock
from workflow.artifacts.gitrepo import Repo
from workflow.core import beneath, events
from workflow.core.config import Config
from workflow.core.errors import DeliveryError, GitError, GitLayoutError, RuleError, TransportError
from workflow.core.locate import Artifact, find, locate
from workflow.delivery import outbox
from workflow.delivery.notify import Composed, NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.inbox import select
from workflow.policy.roster import Roster


class MoveRequest(NamedTuple):
    artifact: str
    state: str
    role: str
    reason: str = ""
    notify: tuple[str, ...] = ()
    event: str | None = None
    variables: Mapping[str, str] = {}
    notified_by: str | None = None  # the caller sends the mail itself (run-role): the hook stays quiet
    in_reply_to: str | None = None  # the notification's parent; default: the request it answers


class MoveResult(NamedTuple):
    before: Artifact
    after: Artifact
    commit: str | None  # None: the artifact stays put (already in that state)
    subject: str
    message_id: str | None = None
    sent: str = ""  # where the notification went
    queued: Path | None = None
    error: str = ""  # why the notification is queued or was refused


def commit_message(req: MoveRequest, before: Artifact, after: Artifact, event: str | None) -> str:
    subject = transitions.commit_subject(req.role, before.state, after.state, before.stem)
    body = [subject, ""]
    if req.reason.strip():
        body += [req.reason.strip(), ""]
    body.append(f"Workflow-Role: {req.role}")
    body.append(f"Workflow-Transition: {before.path} -> {after.path}")
    if event:
        body.append(f"Workflow-Notify: {event}")
    return "\n".join(body) + "\n"


def _notification(app: App, req: MoveRequest, before: Artifact, after: Artifact) -> tuple[str, Composed] | None:
    if not req.notify:
        return None
    event = req.event or events.on_move(before.state, after.state)
    variables = dict(req.variables)
    if req.reason.strip():
        variables.setdefault(events.get(event).reason, req.reason.strip())
    if "next-state" in events.get(event).rules:
        variables.setdefault("NEXT_STATE", after.state)
    parent = req.in_reply_to or answered_request(app, req.role, after, event)
    return event, app.compose(NotifyRequest(event, (after.path,), req.notify, req.role, parent, variables))


def answered_request(app: App, role: str, artifact: Artifact, event: str) -> str | None:
    """The review-request a decision answers: the latest one about ``artifact`` in the mover's
    mailboxes (so an approval or rejection threads under it), for approvals and rejections."""
    if event not in events.DECISIONS or app.parent is not None:
        return None  # inside a run the index is out of sight: the agent names its parent itself
    boxes = app.roster.mailboxes_of(role)
    with app.index() as index:
        index.refresh(boxes)
        rows = select(
            index, boxes, unread=False, event="review-request", artifact=artifact.glob, states=app.config.states
        )
    rows = [r for r in rows if r.message_id]
    return max(rows, key=lambda r: r.date).message_id if rows else None


def role_moves(roster: Roster, who: str) -> tuple[tuple[str, str], ...] | None:
    """The moves an identity owns (None: any legal move, for a human): a role's front matter
    ``moves``; a review panel (or member) approves (proposed → todo); a writing panel revises
    (any → proposed)."""
    role = roster.roles.get(who) if who in roster.roles else None
    if role is not None:
        return None if role.mode == "human" else role.moves
    panel = roster.panels.get(who) or roster.members.get(who)
    if panel is not None:
        return (("proposed", "todo"),) if panel.kind == "review" else (("*", "proposed"),)
    return ()


def check(config: Config, req: MoveRequest, roster: Roster | None = None) -> tuple[Artifact, Artifact]:
    """The artifact now and after the move; raises naming the problem."""
    if req.state not in config.states:
        raise GitError(f"unknown state {req.state!r}; expected one of {', '.join(config.states)}")
    before = find(req.artifact, config)
    after = before.moved(req.state)
    if before.state != after.state and not transitions.allowed(config, before.state, after.state):
        raise GitError(transitions.refusal(config, before.path, before.state, after.state))
    if before.state != after.state and roster is not None:
        owned = role_moves(roster, req.role)
        if owned is not None and (before.state, after.state) not in owned and ("*", after.state) not in owned:
            mine = ", ".join(f"{a} → {b}" for a, b in owned) or "none"
            raise GitError(
                f"{req.role} may not move {before.path} {before.state} → {after.state}; its moves: {mine} "
                "(front matter `moves` in its role file); ask the role that owns this move"
            )
    return before, after


def move(
    app: App,
    req: MoveRequest,
    transport: Transport,
    journal: Callable[[Artifact, Artifact], None] | None = None,
    owned: Callable[[str], bool] | None = None,
) -> MoveResult:
    """Move and commit, then send the notification (queued on failure). ``journal`` hears of the
    move after every check and before the commit (a run records it, to revert it if the run fails).
    ``owned`` says which uncommitted artifact paths the caller's run wrote: such an artifact moves
    with its edits, in the move's commit; any other must be committed first.

    Everything from finding the artifact to the commit holds the project's git lock, so two runs
    moving at once queue: the second sees where the first put the artifact."""
    config = app.config
    role = app.roster.identity(req.role)
    req = req._replace(role=role)
    with project_lock(config) as env:
        before, after = check(config, req, app.roster)
        note = _notification(app, req, before, after)  # renders now: a missing variable refuses before any change
        event = note[0] if note else req.notified_by
        sha: str | None = None
        if before.state != after.state:
            carry = owned is not None and _uncommitted(config, before) and owned(before.path)
            _git_move_check(config, before, after, carry)
            if journal is not None:
                journal(before, after)
            sha = _git_move(
                config, before, after, commit_message(req, before, after, event), env=env, carry=carry, author=role
            )
    subject = (
        transitions.commit_subject(role, before.state, after.state, before.stem)
        if sha
        else (f"{before.path} stays in {before.state}/")
    )
    if note is None:
        return MoveResult(before, after, sha, subject)
    composed = note[1]
    what = f"{event} for {after.path} to {', '.join(composed.recipients)}"
    try:
        where = composed.send(transport)
    except RuleError as e:
        q = outbox.put(config, composed.raw, composed.sender_address, composed.recipients, what, str(e), failed=True)
        return MoveResult(before, after, sha, subject, composed.message_id, "", q, str(e))
    except (TransportError, DeliveryError) as e:
        failed = isinstance(e, TransportError) and e.code is not None and 500 <= e.code < 600
        q = outbox.put(config, composed.raw, composed.sender_address, composed.recipients, what, str(e), failed=failed)
        return MoveResult(before, after, sha, subject, composed.message_id, "", q, str(e))
    return MoveResult(before, after, sha, subject, composed.message_id, where)


def revert(config: Config, before: Artifact, after: Artifact, role: str, reason: str) -> str | None:
    """Put an artifact a failed run moved back where it was, with one commit naming why.

    None when the artifact is no longer where the run left it (someone moved it since, or the
    run's move never happened). Hooks are skipped (``--no-verify``): the move back restores a state
    the graph allowed before, even where the reverse transition is not itself in the graph; the
    ``Workflow-Notify`` trailer keeps the post-commit hook quiet, since nobody was told of the move."""
    if not beneath.is_file(config.project_dir, after.path) or beneath.lstat(config.project_dir, before.path):
        return None
    message = (
        f"{role}: revert {transitions.verb(before.state, after.state)} {before.stem} ({after.state} → {before.state})\n\n"
        f"{reason}\n\nWorkflow-Role: {role}\nWorkflow-Transition: {after.path} -> {before.path}\n"
        "Workflow-Notify: none (the move of a failed run, reverted)\n"
    )
    with project_lock(config) as env:
        if not beneath.is_file(config.project_dir, after.path) or beneath.lstat(config.project_dir, before.path):
            return None
        repo = Repo(config)
        head = plumbing.head_entries(repo, [after.path]).get(after.path)
        sha = _git_move(config, after, before, message, env=env, verify=False, author=role, content=head)
        if head is not None and _uncommitted(
            config, before
        ):  # the failed run edited it after the move: its edits go too
            beneath.write(config.project_dir, before.path, plumbing.blob(repo, head.sha), create_parents=False)
        return sha


def _top(config: Config) -> Repo:
    try:
        return Repo(config)
    except GitLayoutError:  # git must not run here now: its own words name the file
        raise
    except GitError:
        raise GitError(f"{config.project_dir} is not inside a git repository; run `workflow init`") from None


def _uncommitted(config: Config, a: Artifact) -> bool:
    """Whether the artifact's file differs from HEAD (edited, new, or staged)."""
    repo = Repo(config)
    return bool(repo.git("status", "--porcelain", "-uall", "--", repo.to_top(a.path)).strip())


def _git_move_check(config: Config, before: Artifact, after: Artifact, carry: bool) -> None:
    """Refuse, naming the truth, a move git could not make: the artifact is gone from where it was
    found (another run moved it: say where it is now), it has edits that are not this run's, or
    its new place is taken."""
    repo = _top(config)
    src, dst = repo.to_top(before.path), repo.to_top(after.path)
    if beneath.lstat(config.project_dir, before.path) is None:
        now = [a.path for a in locate(before.glob, config)]
        where = f"it is now {' and '.join(now)}" if now else "it is in no state folder now"
        raise GitError(f"{before.path} was moved while this move was checked: {where}")
    if not carry:
        if not repo.git("ls-files", "--", src).strip():
            raise GitError(f"{before.path} is not committed; `git add` and commit it before moving it")
        if repo.git("status", "--porcelain", "--", src).strip():
            raise GitError(f"{before.path} has uncommitted changes; commit or stash them before moving it")
    if beneath.lstat(config.project_dir, after.path) is not None or repo.git("ls-files", "--", dst).strip():
        raise GitError(f"{after.path} already exists; the artifact would be in two state folders")


def _git_move(
    config: Config,
    before: Artifact,
    after: Artifact,
    message: str,
    *,
    env: dict[str, str],
    verify: bool = True,
    carry: bool = False,
    author: str = "",
    content: plumbing.Entry | None = None,
) -> str:
    """Move one artifact and commit just its paths (call holding the project's git lock). The
    file is renamed between folders resolved with no symlink followed (``core.beneath``: never
    into a folder an agent swapped for a link to the owner's), and the commit is made from the
    blob git already has (HEAD's, or with ``carry`` the run's own uncommitted edits, read through
    the same folder fd), never by git reading the path. ``content``: the blob to commit instead.
    Returns the id of the commit this move made, never a later one."""
    repo = _top(config)
    in_head = bool(plumbing.head_entries(repo, [before.path]))
    if content is not None:
        entry: plumbing.Entry | None = content
    elif carry:
        entry = plumbing.hash_files(config, repo, [before.path])[before.path]
    else:
        entry = plumbing.index_entries(repo, [before.path]).get(before.path)
    if entry is None:
        raise GitError(f"{before.path} is not a regular file reached without a symlink; nothing was moved")
    try:
        beneath.rename(config.project_dir, before.path, after.path)
    except (beneath.UnreachableError, OSError) as e:
        # an agent's own git (no lock of ours binds it) may have moved it between the check and here
        _git_move_check(config, before, after, carry)
        raise GitError(f"cannot move {before.path} to {after.path}: {e}") from None
    changes: dict[str, plumbing.Entry | None] = {before.path: None, after.path: entry}
    if not in_head and not plumbing.index_entries(repo, [before.path]):
        del changes[before.path]
    who = edits.author(config, author) if author else ""
    message = "".join(c for c in message if c in "\n\t" or c.isprintable())  # git takes no NUL in a message
    try:
        return plumbing.commit(repo, changes, message, author=who, env=env, hooks=verify)
    except (GitError, OSError, ValueError) as e:  # whatever stops the commit, the move is put back
        try:
            beneath.rename(config.project_dir, after.path, before.path)
        except (beneath.UnreachableError, OSError):
            pass
        raise GitError(f"commit refused; {before.path} is back where it was: {e}") from None
