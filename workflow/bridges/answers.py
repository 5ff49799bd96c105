"""Answers: what a bridge reads from its own mailbox — the roles' answers to the questions it asked.

A bridge asks by mail From one of its addresses (``slack+TAG@``); agentd runs the role, and the
answer — or, once agentd gives up, a ``blocker-report`` — is delivered into the bridge's mailbox
(``policy.roster.bridge_mailbox``). ``waiting`` lists what is unread there, oldest first, each as
an ``Answer``: which question it replies to, what the role said (the template's text around it
taken off), and the agent session it was given in. The bridge acts on one (posts it, say), then
``done`` marks it read; a crash between the two hands it over again, so a bridge records what it
did before doing it (its steps) and acts once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from workflow.agents.asked import RESUMED_HEADER, SESSION_HEADER
from workflow.app import App
from workflow.mail.body import body_text
from workflow.mail.ids import given_msgid
from workflow.mail.maildir import Entry
from workflow.mail.message import parse
from workflow.policy.roster import bridge_mailbox

ANSWER, FAILED = "answer", "blocker-report"


class Answer(NamedTuple):
    entry: Entry
    event: str  # answer, blocker-report (the role gave up), or another event a role sent
    sender: str  # the role that answered
    to: str  # the bridge address it answers
    in_reply_to: str  # the question's Message-ID ("" when it names none)
    text: str  # what the role said
    session: str  # the agent session it was given in ("" when unknown)
    resumed: str  # the earlier session it went on with ("" for a new one)

    @property
    def failed(self) -> bool:
        return self.event == FAILED


def said(body: str, event: str) -> str:
    """The role's own words in an answer or blocker-report body: past the greeting line, before the
    signature (and, for a blocker-report, its ``Blocker:`` text alone)."""
    text = body.replace("\r\n", "\n")
    cut = text.rfind("\n-- \n")
    text = text[:cut] if cut >= 0 else text
    head, sep, rest = text.partition("\n\n")
    text = rest if sep else head
    if event == FAILED:
        text = text.removeprefix("Blocker: ")
        for tail in ("\nPlease answer in this thread", "\nTried: ", "\nProposed next actions: "):
            text = text.split(tail)[0]
    return text.strip()


def waiting(app: App, bridge: str) -> Iterator[Answer]:
    """The unread mail in ``bridge``'s mailbox, oldest first."""
    md = app.maildirs
    box = bridge_mailbox(bridge)
    for e in sorted((e for e in md.scan(box) if not e.seen), key=lambda e: e.key):
        try:
            raw = e.path.read_bytes()
        except FileNotFoundError:
            continue  # marked read meanwhile
        p = parse(raw)
        event = (p.get("X-Event-Type") or "").strip()
        irt = given_msgid(p.get("In-Reply-To") or "") or ""
        yield Answer(
            e,
            event,
            (p.get("From") or "").strip(),
            (p.get("To") or "").strip(),
            irt,
            said(body_text(raw, p), event),
            (p.get(SESSION_HEADER) or "").strip(),
            (p.get(RESUMED_HEADER) or "").strip(),
        )


def done(app: App, a: Answer) -> None:
    """Mark an answer read: it is not handed over again."""
    app.maildirs.mark_seen(a.entry.mailbox, a.entry.key)
