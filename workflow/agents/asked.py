"""Asked: a run on mail a bridge sent — one outside conversation's question, answered by mail.

A bridge turns a person's words (a Slack thread, a correspondent's reply) into workflow mail From
one of its own addresses (``slack+TAG@``: ``policy.roster``'s bridge kind), and reads its answers
from its own mailbox. agentd runs the role on one conversation's mail alone (``run-role
--message``), so a run never mixes conversations. Here:

- ``asker``: the bridge address every handed message came from ("" when they are not one
  conversation's); a run handed no ``only`` takes none of a bridge's mail (``own_mail``);
- ``section``: what the prompt says of it — the finish summary is the answer, sent back;
- ``answer``: that answer, an ``answer`` mail in reply to the last question, staged in the run,
  so it is sent only when the run commits (a failed run answers nothing: agentd tells the bridge
  once it gives up);
- ``Sessions``: the role's agent session per conversation, which the next run on it resumes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from workflow.app import App
from workflow.core.files import write_atomic
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.rows import Row

SESSION_HEADER = "X-Workflow-Session"  # the agent session an answer was given in
RESUMED_HEADER = "X-Workflow-Resumed"  # the earlier session it went on with


def asker(app: App, rows: Sequence[Row]) -> str:
    """The one bridge address all of ``rows`` came from ("" for none, or for mail of several)."""
    senders = {r.sender.lower() for r in rows}
    if len(senders) != 1:
        return ""
    (sender,) = senders
    return sender if app.roster.bridge_of(sender) else ""


def own_mail(app: App, rows: Sequence[Row]) -> tuple[Row, ...]:
    """The rows that are no bridge's: a bridge's conversation is run on its own, by ``--message``."""
    return tuple(r for r in rows if not app.roster.bridge_of(r.sender))


def section(app: App, address: str) -> str:
    """The prompt's word on a bridge's question: who asks, and that the finish summary answers."""
    bridge = app.roster.bridge_of(address)
    return (
        f"# Asked through the {bridge} bridge\n"
        f"The mail above is a person's request, brought by the {bridge} bridge ({address}). "
        "Do what it asks, then finish: the summary you finish with is your answer, sent back to them "
        "as it is. Write it for that person: plain, complete, no mail headers.\n"
    )


def answer(
    app: App, role: str, address: str, rows: Sequence[Row], said: str, session: str, resumed: str, run: Transport
) -> str:
    """Stage the answer in the run (sent when it commits); its Message-ID."""
    last = max(rows, key=lambda r: (r.date, r.id))
    artifacts = next((r.artifacts for r in reversed(rows) if r.artifacts), ()) or (
        f"{app.config.artifact_roots[0]}/*/*",
    )
    headers = tuple((k, v) for k, v in ((SESSION_HEADER, session), (RESUMED_HEADER, resumed)) if v)
    c = app.compose(
        NotifyRequest("answer", artifacts[:1], (address,), role, last.message_id, {"ANSWER": said}, headers)
    )
    c.send(run)
    return c.message_id


class Sessions:
    """One role's agent sessions, by the bridge address of each conversation."""

    def __init__(self, app: App, role: str) -> None:
        self.path: Path = app.config.state.sessions / f"{role}.json"

    def _all(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def get(self, address: str) -> str:
        return self._all().get(address, "")

    def put(self, address: str, session: str) -> None:
        """Remember ``session`` for the conversation (one run of a role at a time writes this file)."""
        data = self._all()
        if session:
            data[address] = session
        else:
            data.pop(address, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True))
