"""Report: the Slack bridge's Block Kit messages — the classification and the result.

Each builder returns ``(text, blocks)``: ``text`` is the plain-text fallback (notifications,
clients without blocks), ``blocks`` the Block Kit layout docs/bridges.md's reporter builds: the
request's summary, its intent and status as fields, and, for a result, a section with the
agent's output. Text from users and agents goes into ``mrkdwn`` escaped (``&``, ``<``, ``>``),
so nobody's message becomes a mention or a link; a section's text is cut to Slack's 3,000.
"""

from __future__ import annotations

from typing import Any

SECTION_MAX = 3000
STATUS_EMOJI = {
    "pending": ":bell:",
    "queued": ":hourglass_flowing_sand:",
    "running": ":eyes:",
    "completed": ":white_check_mark:",
    "failed": ":x:",
    "waiting": ":bell:",
    "rejected": ":no_entry_sign:",
}


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int = SECTION_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fields(intent: str, status: str, role: str) -> dict[str, Any]:
    fields = [
        {"type": "mrkdwn", "text": f"*Intent*\n{escape(intent)}"},
        {"type": "mrkdwn", "text": f"*Status*\n{STATUS_EMOJI.get(status, '')} {escape(status)}".strip()},
    ]
    if role:
        fields.append({"type": "mrkdwn", "text": f"*Role*\n{escape(role)}"})
    return {"type": "section", "fields": fields}


def classification(
    summary: str, intent: str, status: str, role: str = "", question: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The message that says how a request was understood (and, when pending, what to clarify)."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(f"*Task:* {escape(summary)}")}},
        _fields(intent, status, role),
    ]
    text = f"Task: {summary} ({intent}, {status})"
    if question:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(f":bell: {escape(question)}")}})
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": "Reply in this thread to go on; :-1: to cancel."}],
            }
        )
        text = f"{question}\n({text})"
    return text, blocks


def result(summary: str, intent: str, status: str, output: str, role: str = "") -> tuple[str, list[dict[str, Any]]]:
    """The message that carries a task's outcome: its status and the agent's output."""
    title = {"completed": "Done", "failed": "Failed", "waiting": "Waiting for your answer"}.get(status, status)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(f"*{title}:* {escape(summary)}")}},
        _fields(intent, status, role),
        {"type": "divider"},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(escape(output.strip()) or "(no output)")}},
    ]
    prefix = f"Failed ({role}): " if status == "failed" else ""
    return f"{prefix}{output}", blocks
