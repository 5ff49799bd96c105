"""Plain mail: a person's plain mail gets its event type at delivery, by rules people can read.

Phone and web mail clients cannot add ``X-Event-Type``, and mail without one wakes no role. So
the server types what a person's login sends (a users-file login sending as a human role) when it
carries no ``X-Event-Type``, before the copies are written (delivery stays durable before ``250``),
and records how in ``X-Workflow-Typing`` — one header every reader (agentd's wake, the decisions,
the cockpit, a mail client) reads alike. No sender may write that header: only the server does.
The rules, in order (the thread is the message's References and In-Reply-To, as far as the
sender's own roles received or sent it):

1. a reply in the thread of a review-request the person's role received: when its first own line
   is a decision (``mail.verdicts``), it stays untyped and agentd applies it (``decision …``);
   when it is nearly one, it stays untyped and agentd asks the person to confirm (``unsure …``);
2. a reply to a ``question`` or ``clarification-request`` the person received is an ``answer``,
   unless the role it goes to wakes on questions and not on answers (then a ``question``);
3. any other reply in a review-request's thread is a ``question`` to its requester;
4. anything else, new mail included, is a ``question`` to the role it is addressed to.

A typed reply without ``X-Artifacts`` takes those of the message it answers (the review-request,
else its parent), so the role it wakes knows what it is about. Mail the person typed themselves is
marked ``sent`` and otherwise left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflow.mail.body import body_text
from workflow.mail.message import Parsed, encode_header, thread_ids
from workflow.mail.reader import Reader
from workflow.mail.rows import Row
from workflow.mail.verdicts import near, verdict
from workflow.policy.roster import Roster

HEADER = "X-Workflow-Typing"
SENT = "sent"  # the person typed it themselves
QUESTIONS = ("question", "clarification-request")


def infer(raw: bytes, parsed: Parsed, role: str, to: Sequence[str], roster: Roster, index: Reader) -> bytes:
    """The message as stored: ``raw`` (LF line ends) with ``X-Workflow-Typing`` and, when a rule
    gives one, ``X-Event-Type`` (and the inherited ``X-Artifacts``) prepended. ``role`` is the
    human role it comes from, ``to`` the mailboxes it is delivered to."""
    if parsed.event is not None:
        return _prepend(raw, [(HEADER, SENT)])
    ancestry = thread_ids(parsed)
    rows: list[Row] = []
    own = roster.mailboxes_of(role)
    if ancestry:
        rows = index.query(own, message_ids=ancestry, senders=[parsed.sender])
    parent_id = parsed.in_reply_to_ids[-1] if parsed.in_reply_to_ids else None
    parent = next((r for r in rows if r.message_id == parent_id), None)
    requests = [r for r in rows if r.event == "review-request" and r.mailbox in own]
    request = max(requests, key=lambda r: r.date) if requests else None
    text = body_text(raw, parsed)
    if request is not None:
        found = verdict(text)
        if found is not None:
            why = f"decision {found[0]}: the first line of a reply in the thread of review-request {request.message_id}; agentd applies it"
            return _prepend(raw, [(HEADER, why)])
        slip = near(text)
        if slip is not None:
            why = (
                f"unsure {slip.event}: the first word {slip.written!r} is nearly {slip.word.capitalize()!r}, "
                f"in the thread of review-request {request.message_id}; the sender is asked to confirm"
            )
            return _prepend(raw, [(HEADER, why)])
    targets = [r for r in (roster.roles.get(m) for m in to) if r is not None and r.mode != "human"]
    names = ", ".join(dict.fromkeys(m for m in to)) or "nobody"
    if parent is not None and parent.event in QUESTIONS and parent.mailbox in own:
        wakes_on_answers = any("answer" in r.triggers for r in targets)
        wakes_on_questions = any("question" in r.triggers for r in targets)
        event = "question" if wakes_on_questions and not wakes_on_answers else "answer"
        why = f"{event}: a reply to the {parent.event} {parent.message_id}, to {names}"
    elif request is not None:
        asker = request.sender.partition("@")[0]
        event, why = (
            "question",
            f"question: a reply in the thread of review-request {request.message_id}, to its requester {asker}",
        )
    elif parent is not None:
        event, why = "question", f"question: a reply to {parent.message_id}, to {names}"
    else:
        event, why = "question", f"question: new mail to {names}"
    headers = [(HEADER, why), ("X-Event-Type", event)]
    source = request or parent
    if not parsed.artifacts and source is not None and source.artifacts:
        headers.append(("X-Artifacts", ", ".join(source.artifacts)))
    return _prepend(raw, headers)


def _prepend(raw: bytes, headers: list[tuple[str, str]]) -> bytes:
    eol = "\r\n" if b"\r\n" in raw.split(b"\n\n", 1)[0] else "\n"
    block = "".join(encode_header(n, v).replace("\r\n", eol) + eol for n, v in headers)
    return block.encode("utf-8") + raw


def kind(parsed: Parsed) -> str | None:
    """How the server typed a person's message (``sent``, ``question``, ``answer``, ``decision``,
    ``unsure``), or None for mail that did not come from a person's login."""
    value = parsed.get(HEADER)
    return value.split(":", 1)[0].split(" ", 1)[0].strip() if value else None
