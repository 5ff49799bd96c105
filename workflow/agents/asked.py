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
- ``Sessions``: the role's agent session per conversation, which the next run on it resumes;
- ``material``: for a question carrying ``X-Workflow-Conversation`` (the Gmail bridge's reply
  loop), that conversation's files under ``StateDir.conversations`` — the whole ``thread.md``
  (replies not yet answered marked NEW), its research files and what was learned of the
  correspondents (``memory.txt``) — with the triage and the memory step the answer follows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.core.files import write_atomic
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.message import parse
from workflow.mail.rows import Row

SESSION_HEADER = "X-Workflow-Session"  # the agent session an answer was given in
RESUMED_HEADER = "X-Workflow-Resumed"  # the earlier session it went on with
CONVERSATION_HEADER = "X-Workflow-Conversation"  # a question about one of the reply loop's conversations
REPLIES_HEADER = "X-Workflow-Replies"  # … and the highest of its replies it asks about
CONVERSATION_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}$")
MEMORY_MARK = "MEMORY:"  # an answer's line that is kept in memory.txt, not sent
RESEARCH_MAX = 20_000  # characters of one research file the prompt quotes


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


def section(app: App, address: str, rows: Sequence[Row] = ()) -> str:
    """The prompt's word on a bridge's question: who asks, that the finish summary answers, and the
    conversation's material when the question is about one."""
    bridge = app.roster.bridge_of(address)
    said = (
        f"# Asked through the {bridge} bridge\n"
        f"The mail above is a person's request, brought by the {bridge} bridge ({address}). "
        "Do what it asks, then finish: the summary you finish with is your answer, sent back to them "
        "as it is. Write it for that person: plain, complete, no mail headers.\n"
    )
    conv, replies = conversation(app, rows)
    return f"{said}\n{material(app, conv, replies)}" if conv else said


def conversation(app: App, rows: Sequence[Row]) -> tuple[str, int]:
    """The conversation the handed mail asks about (``X-Workflow-Conversation`` of the newest that
    has one) and the highest reply it asks about (0: all); ("", 0) for none. An id of any other
    shape is ignored."""
    for r in sorted(rows, key=lambda r: (r.date, r.id), reverse=True):
        entry = app.maildirs.find(r.mailbox, r.key)
        if entry is None:
            continue
        try:
            p = parse(entry.path.read_bytes())
        except OSError:
            continue
        value = (p.get(CONVERSATION_HEADER) or "").strip()
        if CONVERSATION_ID.match(value):
            n = (p.get(REPLIES_HEADER) or "").strip()
            return value, int(n) if n.isascii() and n.isdigit() and len(n) < 7 else 0
    return "", 0


def material(app: App, conv: str, replies: int = 0) -> str:
    """A conversation's prompt material: the whole thread (up to reply #``replies`` when given:
    what came later is asked next), its research, the memory, the triage and the steps of an
    answer. Refused when its thread.md is gone (it can be rebuilt)."""
    d = app.config.state.conversations / conv
    thread = d / "thread.md"
    try:
        text = thread.read_text(encoding="utf-8")
    except OSError:
        raise WorkflowError(f"{thread} is missing; rebuild it with `workflow bridge rebuild-thread {d}`") from None
    later = text.find(f"\n## NEW Reply #{replies + 1} (") if replies else -1
    text = text[:later] if later >= 0 else text
    research = sorted(f for f in (d / "research").iterdir() if f.is_file()) if (d / "research").is_dir() else []
    quoted = "".join(
        f"\n### research/{f.name}\n\n{f.read_text(encoding='utf-8', errors='replace')[:RESEARCH_MAX].rstrip()}\n"
        for f in research
    )
    memory = app.config.state.conversations / "memory.txt"
    known = memory.read_text(encoding="utf-8", errors="replace").strip() if memory.is_file() else ""
    return (
        f"# The conversation\n\n{text.rstrip()}\n\n"
        "# Available context\n"
        + (quoted or "\nNo research files yet.\n")
        + f"\n## What you know of your correspondents (memory.txt)\n\n{known or '(nothing yet)'}\n\n"
        "Read what you need. You may not need any of it.\n\n"
        '# Triage\n\nTrivial ("thanks!", "ok", "got it") → a brief acknowledgement; load no context.\n'
        "Substantive → read the research and memory you need, then answer.\n\n"
        "# Respond\n\nAnswer every reply marked NEW above, in one message: your finish summary is that\n"
        "message, sent as a reply in this thread. If you learned a preference of your correspondent,\n"
        f"end with a line `{MEMORY_MARK} <what to remember>` (one per preference); those lines are kept\n"
        "in memory.txt, not sent.\n"
    )


def answer(
    app: App, role: str, address: str, rows: Sequence[Row], said: str, session: str, resumed: str, run: Transport
) -> str:
    """Stage the answer in the run (sent when it commits); its Message-ID."""
    last = max(rows, key=lambda r: (r.date, r.id))
    artifacts = next((r.artifacts for r in reversed(rows) if r.artifacts), ()) or (app.config.any_artifact,)
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
