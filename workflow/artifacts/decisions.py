"""Decisions by mail: a person's approval or rejection, read from their mail and applied as their move.

A person at a mail client has no shell on the project, so a decision they mail must take effect
without one. A message from a human role (``mode = "human"``) is a decision when

- it says so in its header (``X-Event-Type: approval`` or ``rejection``, as a client such as mutt
  can add), or
- it is a plain reply in a review-request's thread (its ``References`` or ``In-Reply-To`` name
  one: a reply to the question asking to confirm a near decision counts) whose first line of text
  — quoted lines (``>``) and blank lines skipped — begins with one of ``WORDS``: "Approve",
  "Approved", "LGTM" approve; "Reject", "Rejected", "Revise" reject. The rest of the text, up
  to the quoted part or the signature, is the reason.

Outside mail is never a decision: a copy a bridge imported carries its mark (``mail.imported``),
which no sender can write, and ``read`` takes nothing from it, whatever its From: says.

The artifact is the one the message names in ``X-Artifacts``, else the one the review-request
named. ``apply`` makes the person's move with the same checks as ``workflow move --as ROLE``
(``move.move``: the transition graph, one commit authored as the role): an approval moves the
artifact from proposed/ to todo/; a rejection leaves it in proposed/. A plain reply is followed by
the usual notification (an ``approval`` or ``rejection`` to whoever asked for the review, threaded
under the person's mail); a typed one was that notification itself, and a typed approval is sent
on to the roles of the role's ``hands_off`` it did not reach. A decision that cannot be
applied (the artifact moved meanwhile, an illegal transition, no artifact) is answered to the
person by mail saying why and what to do — from a mail client. agentd applies decisions.
"""

from __future__ import annotations

from typing import NamedTuple

from workflow.app import App
from workflow.artifacts.gitrepo import Repo
from workflow.artifacts.move import MoveRequest, move
from workflow.core.errors import WorkflowError
from workflow.core.events import DECISIONS
from workflow.core.locate import Artifact, locate
from workflow.core.senders import local_part
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail import imported
from workflow.mail.body import body_text
from workflow.mail.inbox import read_row, select
from workflow.mail.message import parse, thread_ids
from workflow.mail.reader import Reader
from workflow.mail.rows import Row
from workflow.mail.verdicts import MAX_REASON, WORDS, verdict
from workflow.mail.verdicts import printable as _printable

__all__ = ["MAX_REASON", "WORDS", "Decision", "Outcome", "apply", "people", "read", "verdict"]


class Decision(NamedTuple):
    message_id: str
    role: str  # the person's role: the move is theirs
    event: str  # approval | rejection
    artifacts: tuple[str, ...]  # as the mail (or the review-request it answers) named them
    reason: str
    typed: bool  # it carried X-Event-Type: the mail was the notification
    asked_by: tuple[str, ...]  # who sent the review-request it answers (told of a plain reply's decision)
    via: str  # a mailbox it was delivered to: the role that answers the person when it cannot be applied


class Outcome(NamedTuple):
    decision: Decision
    applied: bool
    detail: str  # the commit (or why nothing moved), or why it was not applied
    sent: str | None = None  # the Message-ID of the notification or the answer sent for it


def people(app: App) -> list[str]:
    """The addresses whose mail may carry a decision: the human roles'."""
    return [f"{name}@{app.config.domain}" for name, role in sorted(app.roster.roles.items()) if role.mode == "human"]


def read(app: App, index: Reader, row: Row) -> Decision | None:
    """The decision a person's message carries, or None when it carries none — and always None
    for outside mail a bridge imported (``mail.imported``), whatever its From: says."""
    role = local_part(row.sender, app.config.domain)
    if row.message_id is None or role is None or app.roster.roles.get(role) is None:
        return None
    if row.event not in DECISIONS and (row.event is not None or not row.in_reply_to):
        return None  # the index says enough: neither typed as a decision nor a reply
    raw = read_row(app.config.mail_root, row)
    if raw is None:
        return None
    parsed = parse(raw)
    if imported.marked(parsed):
        return None  # outside mail: nobody's decision, even one stored before the bridge judged senders
    request = _request(index, thread_ids(parsed))  # a reply inherits its thread (delivery.plain)
    text = body_text(raw, parsed)
    if parsed.event is not None and parsed.event in DECISIONS:
        reason = (verdict(text) or ("", ""))[1] or _printable(text)
        event, typed = parsed.event, True
    elif parsed.event is None and request is not None:
        found = verdict(text)
        if found is None:
            return None
        (event, reason), typed = found, False
    else:
        return None
    artifacts = tuple(parsed.artifacts) or (request.artifacts if request is not None else ())
    asker = local_part(request.sender, app.config.domain) if request is not None else None
    asked = (asker,) if asker else ()
    return Decision(row.message_id, role, event, artifacts, reason, typed, asked, row.mailbox)


def _request(index: Reader, parents: list[str]) -> Row | None:
    """The latest review-request among a message's ancestors, if any."""
    if not parents:
        return None
    rows = [r for r in index.query(message_ids=parents) if r.event == "review-request"]
    return max(rows, key=lambda r: r.date) if rows else None


def apply(app: App, d: Decision, transport: Transport, tell: bool = True) -> Outcome:
    """Make the decision the person's move; on a refusal, tell them why by mail (``tell``; the
    cockpit shows it instead when the decision is an agent role's, made by the owner)."""
    try:
        artifact = _one(app, d)
        _asked(app, d.role, artifact)
        source, target = DECISIONS[d.event]
        if artifact.state == target and d.event == "approval":
            if Repo(app.config).tracked("HEAD", [artifact.path]):
                return Outcome(d, True, f"{artifact.path} is in {target}/ already")
            raise WorkflowError(  # a move cut short between its `git mv` and its commit
                f"{artifact.path} is in {target}/ but not committed there (a move was interrupted); "
                "the project's owner must commit it or move it back (`git status` shows it)"
            )
        if artifact.state != source:
            raise WorkflowError(
                f"{artifact.path} is in {artifact.state}/ now, and {_a(d.event)} decides on an artifact in {source}/"
            )
        notify = () if d.typed else d.asked_by
        variables: dict[str, str] = {}
        if d.typed and d.event == "approval":  # the person's own mail was the approval: hand it on
            notify = _not_reached(app, d)
            variables = {"NEXT_ROLES": ",".join(notify)} if notify else {}
        req = MoveRequest(
            artifact.path,
            target,
            d.role,
            reason=d.reason,
            notify=notify,
            variables=variables,
            event=d.event if notify else None,
            notified_by=d.event if d.typed else None,
            in_reply_to=d.message_id,
        )
        res = move(app, req, transport)
    except WorkflowError as e:
        why = str(e)
        return Outcome(d, False, why, _tell(app, d, why, transport) if tell else None)
    done = f"commit {res.commit[:12]}" if res.commit else res.subject
    if res.error:
        done += f"; the notification is queued: {res.error}"
    return Outcome(d, True, done, res.message_id)


def _not_reached(app: App, d: Decision) -> tuple[str, ...]:
    """The roles of the person's hand-off (``hands_off``) their typed approval did not reach (a
    client writes no Cc of ours): they are sent the approval after the move."""
    handoff = app.roster.hands_off(d.role)
    if not handoff:
        return ()
    with app.index() as index:
        index.refresh()
        reached = {r.mailbox for r in index.query(message_ids=[d.message_id])}
    return tuple(h for h in handoff if not reached.intersection(app.roster.mailboxes_of(h)))


def _a(event: str) -> str:
    return f"an {event}" if event[:1] in "aeiou" else f"a {event}"


def _asked(app: App, role: str, artifact: Artifact) -> None:
    """Refuse a decision on an artifact nobody asked this person to review: a decision by mail
    answers a review-request their role received (from another role)."""
    boxes = app.roster.mailboxes_of(role)
    with app.index() as index:
        rows = select(
            index, boxes, unread=False, event="review-request", artifact=artifact.glob, states=app.config.states
        )
    if not any(local_part(r.sender, app.config.domain) not in (role, None) for r in rows):
        raise WorkflowError(
            f"{role} was never asked to review {artifact.path}: a decision by mail answers a review-request you received"
        )


def _one(app: App, d: Decision) -> Artifact:
    if not d.artifacts:
        raise WorkflowError("the message names no artifact (no X-Artifacts, and it answers no review-request)")
    found = {a.path: a for ref in d.artifacts for a in locate(ref, app.config)}
    if len(found) != 1:
        what = ", ".join(sorted(found)) or "no file"
        raise WorkflowError(f"{', '.join(d.artifacts)} names {what}; a decision applies to exactly one artifact")
    return next(iter(found.values()))


def _tell(app: App, d: Decision, why: str, transport: Transport) -> str | None:
    """A reply to the person, from the role they wrote to: their decision was not applied, why, and
    what to do from a mail client. Its Message-ID, or None when it could not be sent."""
    sender: str = d.via
    parent: str | None = d.message_id
    if sender == d.role or sender not in app.roster.roles:  # a new thread, from whoever hears of failures
        sender, parent = app.config.agentd.escalate_to, None
        if sender == d.role or sender not in app.roster.roles:
            sender = app.config.default_sender
    artifact = d.artifacts[0] if d.artifacts else app.config.any_artifact
    found = locate(artifact, app.config)
    if len(found) == 1:
        artifact = found[0].glob
    variables = {
        "STATUS": f"your {d.event} {d.message_id} was not applied",
        "CONTEXT": f"{why} (answered by agentd)",
        "NEXT_ACTIONS": (
            "nothing moved. Reply to the latest review-request of this artifact with Approve, Reject or "
            "Revise on the first line, or ask the project's owner."
        ),
    }
    try:
        c = app.compose(NotifyRequest("status-update", (artifact,), (d.role,), sender, parent, variables))
        c.send(transport)
    except WorkflowError:
        return None  # the refusal is in agentd's log either way
    return c.message_id
