"""Heard: every mail a person's login sends has an effect, or an answer that says why not.

agentd's decision step (``agentd.decide``) reads each person's mail once. A decision is applied or
answered (``artifacts.decisions``); this module takes the rest — the mail the server marked as a
person's (``delivery.plain``: its ``X-Workflow-Typing`` header):

* ``unsure``: its first line is nearly a decision ("Apprvoed"). Nothing moves: the role it was
  sent to asks the person, in the thread, to confirm, quoting what was understood.
* anything else has an effect when one of its copies wakes a role (a role agentd runs, whose
  triggers hold its event) or lands in a human role's mailbox (a person reads it there). Without
  one, the role it reached answers the person in the thread: what it wakes on, what to send.

Mail the owner's commands send from a human role (``workflow-notify`` from the shell) carries no
such header and is left alone: the owner chose its type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.core.locate import locate
from workflow.core.senders import local_part
from workflow.delivery import plain
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.body import body_text
from workflow.mail.inbox import read_row
from workflow.mail.message import parse, thread_ids
from workflow.mail.reader import Reader
from workflow.mail.rows import Row
from workflow.mail.verdicts import near

Watch = Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # role → (its mailboxes, its triggers)


class Heard(NamedTuple):
    message_id: str
    role: str  # the person's role
    kind: str  # how the server typed it (``delivery.plain.kind``)
    effect: str  # what it did ("wakes spec-writer"), or "" when it had none
    answer: str | None = None  # the Message-ID of the answer sent, if one was
    why: str = ""  # what the answer said


def hear(app: App, index: Reader, row: Row, watch: Watch, idle: Sequence[str], transport: Transport) -> Heard | None:
    """The effect of a person's mail that is no decision, or the answer sent for it; None for
    mail that did not come from a person's login."""
    role = local_part(row.sender, app.config.domain)
    raw = read_row(app.config.mail_root, row)
    if raw is None or row.message_id is None or role is None:
        return None
    parsed = parse(raw)
    kind = plain.kind(parsed)
    if kind is None or kind == "decision":
        return None
    copies = index.query(message_ids=[row.message_id])
    boxes = tuple(dict.fromkeys(r.mailbox for r in copies if r.message_id == row.message_id)) or (row.mailbox,)
    via = next((b for b in boxes if b in app.roster.roles and b != role), "")
    artifact = _artifact(app, index, role, parsed.artifacts or list(row.artifacts), thread_ids(parsed))
    if kind == "unsure":
        slip = near(body_text(raw, parsed))
        said = slip.line if slip is not None else (parsed.get(plain.HEADER) or "")
        meant = (
            f"{slip.word.capitalize()} ({'an' if slip.event == 'approval' else 'a'} {slip.event})"
            if slip
            else "a decision"
        )
        question = (
            f'you wrote "{said}". Did you mean {meant} of {artifact}? Nothing has moved. To decide, reply '
            "in this thread with Approve (or Reject, or Revise) as the first word of your first line; any "
            "other reply reaches the requester as a question."
        )
        sent = _send(app, "question", artifact, role, via, row.message_id, {"QUESTION": question}, transport)
        return Heard(row.message_id, role, kind, "", sent, "asked to confirm")
    event = parsed.event or ""
    effects = []
    for box in boxes:
        holder = app.roster.roles.get(box)
        woken = [name for name, (mbs, triggers) in watch.items() if box in mbs and event in triggers]
        if holder is not None and holder.mode == "human":
            effects.append(f"in {box}'s mailbox for the person who holds it")
        elif woken:
            effects.append(f"wakes {woken[0]}")
        elif holder is None:
            effects.append(f"in {box}")  # a panel member's mailbox: its panel reads it
    if effects:
        return Heard(row.message_id, role, kind, "; ".join(effects))
    waiting = [b for b in boxes if b in idle]
    if waiting:
        why = f"{', '.join(waiting)} cannot run until the project's owner chooses its agent backend; your mail waits in its mailbox"
    else:
        runs = {b for mbs, _ in watch.values() for b in mbs}
        takes = "; ".join(
            f"{b} wakes on {', '.join(app.roster.roles[b].triggers) or 'nothing'}"
            if b in runs
            else f"{b} is not run by agentd here"
            for b in boxes
            if b in app.roster.roles
        )
        why = (
            f"your {event or 'mail'} reached {', '.join(boxes)}, and no role acts on it: {takes or 'no role reads it'}"
        )
    variables = {
        "STATUS": f"your {event or 'mail'} {row.message_id} woke nobody",
        "CONTEXT": f"{why} (answered by agentd)",
        "NEXT_ACTIONS": "write to the role that should act (its role file says what wakes it), or ask the project's owner.",
    }
    sent = _send(app, "status-update", artifact, role, via, row.message_id, variables, transport)
    return Heard(row.message_id, role, kind, "", sent, why)


def _artifact(app: App, index: Reader, person: str, named: Sequence[str], ancestry: Sequence[str]) -> str:
    """The artifact an answer names: the mail's own, else that of the review-request in its thread
    the person received (never one of a thread they may not read), else any."""
    refs = list(named)
    if not refs and ancestry:
        own = app.roster.mailboxes_of(person)
        found = [r for r in index.query(own, message_ids=list(ancestry)) if r.event == "review-request" and r.artifacts]
        if found:
            refs = list(max(found, key=lambda r: r.date).artifacts)
    for ref in refs:
        hits = locate(ref, app.config)
        if len(hits) == 1:
            return hits[0].glob
    return refs[0] if refs else app.config.any_artifact


def _send(
    app: App,
    event: str,
    artifact: str,
    person: str,
    via: str,
    parent: str,
    variables: dict[str, str],
    transport: Transport,
) -> str | None:
    """Mail the person from the role their mail reached (else whoever hears of failures), in the
    thread. Its Message-ID, or None when it could not be sent (agentd's log says so either way)."""
    sender: str = via
    reply_to: str | None = parent
    if sender not in app.roster.roles or sender == person:
        sender, reply_to = app.config.agentd.escalate_to, None
        if sender == person or sender not in app.roster.roles:
            sender = app.config.default_sender
    try:
        c = app.compose(NotifyRequest(event, (artifact,), (person,), sender, reply_to, variables))
        c.send(transport)
    except WorkflowError:
        return None
    return c.message_id
