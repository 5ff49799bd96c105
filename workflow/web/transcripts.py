"""Transcripts: a run's transcript read from its backend's own records, as steps a page shows —
the model's text, each tool call with its arguments, its result, and which calls moved an
artifact or sent mail.

Each agent CLI keeps its own shape, and each is read as it is: Claude Code's session JSONL (lines
of ``type`` ``assistant`` / ``user`` holding a ``message`` with ``text``, ``tool_use`` and
``tool_result`` blocks); Codex's rollout JSONL (``response_item`` payloads: ``message``,
``function_call``, ``function_call_output``) and its ``exec --json`` events (``item.completed``);
Gemini CLI's chat (JSON lines or one object of ``messages``: ``user`` / ``gemini`` with
``toolCalls``); and the API backend's turns (Anthropic messages: ``role`` and ``content`` blocks).
A transcript is the agent's own words: read as untrusted, shown escaped, each piece cut short.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from workflow.agents.calls import call_line

TEXT_MAX = 4000  # characters of one step's text shown
MOVES = ("move_artifact", "workflow move")  # a call that moves an artifact (an MCP tool, a command)
MAILS = ("send_message", "workflow notify", "workflow send", "workflow reply")


class Step(NamedTuple):
    kind: str  # text | call | result | user
    who: str  # assistant | user | tool
    text: str  # the model's words, a call's line (name(arguments)), a result's text
    tag: str = ""  # move | mail: what the call did, for a call of those


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 1] + "…"


def _tag(line: str) -> str:
    if any(m in line for m in MOVES):
        return "move"
    if any(m in line for m in MAILS):
        return "mail"
    return ""


def _call(name: object, arguments: object) -> Step:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    line = call_line(str(name or "?"), arguments)
    return Step("call", "assistant", line, _tag(line))


def _text(value: object) -> str:
    """The words of a content value: a string, or a list of blocks holding ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v.get("text", v.get("content", ""))) if isinstance(v, dict) else _text(v) for v in value)
    if isinstance(value, dict):
        return _text(value.get("text", value.get("output", "")))
    return ""


def _blocks(who: str, content: object) -> Iterator[Step]:
    """Anthropic-shaped content (Claude Code's and the API backend's): text, tool_use, tool_result."""
    if isinstance(content, str):
        if content.strip():
            yield Step("text" if who == "assistant" else "user", who, _cut(content.strip()))
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            yield Step("text" if who == "assistant" else "user", who, _cut(str(block["text"]).strip()))
        elif kind == "tool_use":
            yield _call(block.get("name"), block.get("input"))
        elif kind == "tool_result":
            yield Step("result", "tool", _cut(_text(block.get("content")).strip()))


def _event(e: dict[str, Any]) -> Iterator[Step]:
    kind = e.get("type")
    payload = e.get("payload")
    if kind in ("assistant", "user") and isinstance(e.get("message"), dict):  # Claude Code
        yield from _blocks(str(kind), e["message"].get("content"))
    elif kind == "response_item" and isinstance(payload, dict):  # Codex's rollout
        p = payload.get("type")
        if p == "message" and payload.get("role") in ("assistant", "user"):
            who = str(payload["role"])
            words = _text(payload.get("content")).strip()
            if words and not (who == "user" and words.startswith("<")):  # its environment preamble
                yield Step("text" if who == "assistant" else "user", who, _cut(words))
        elif p in ("function_call", "custom_tool_call"):
            yield _call(payload.get("name"), payload.get("arguments", payload.get("input")))
        elif p in ("function_call_output", "custom_tool_call_output"):
            yield Step("result", "tool", _cut(_text(payload.get("output")).strip()))
    elif kind == "item.completed" and isinstance(e.get("item"), dict):  # Codex's exec --json
        item = e["item"]
        if item.get("type") == "agent_message":
            yield Step("text", "assistant", _cut(str(item.get("text", ""))))
        elif item.get("type") == "mcp_tool_call":
            yield _call(f"{item.get('server', '?')}.{item.get('tool', '?')}", item.get("arguments"))
        elif item.get("type") == "command_execution":
            yield _call("shell", str(item.get("command", "")))
    elif kind in ("gemini", "user") and "content" in e:  # Gemini CLI's chat
        who = "assistant" if kind == "gemini" else "user"
        words = _text(e.get("content")).strip()
        if words:
            yield Step("text" if who == "assistant" else "user", who, _cut(words))
        for c in e.get("toolCalls") or []:
            if isinstance(c, dict):
                yield _call(c.get("name"), c.get("args"))
                if c.get("result") is not None:
                    yield Step("result", "tool", _cut(_text(c.get("resultDisplay") or c.get("result")).strip()))
    elif e.get("role") in ("assistant", "user") and "content" in e:  # the API backend's turns
        yield from _blocks(str(e["role"]), e.get("content"))


def _objects(text: str) -> list[dict[str, Any]]:
    """The transcript's records: one JSON document (a list, or an object of ``messages``), else
    JSON lines; a Gemini message written again (same id, more calls) counts once, its last."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        whole = whole.get("messages", [whole])
    if isinstance(whole, list):
        items = [d for d in whole if isinstance(d, dict)]
    else:
        items = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if isinstance(d, dict):
                    items.append(d)
    last: dict[str, int] = {}
    for i, d in enumerate(items):
        if d.get("type") == "gemini" and d.get("id") is not None:
            last[str(d["id"])] = i
    return [d for i, d in enumerate(items) if d.get("type") != "gemini" or last.get(str(d.get("id")), i) == i]


def steps(text: str) -> list[Step]:
    """The steps of a transcript, in order."""
    out: list[Step] = []
    for e in _objects(text):
        out.extend(s for s in _event(e) if s.text)
    return out
