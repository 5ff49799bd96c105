"""Reports: what an agent CLI's output says of its run — summary, session, token use, cost, failure.

Each CLI prints its own shape: Claude Code one JSON result object (``--output-format json``) or a
stream of JSON lines ending in a ``"type": "result"`` line (``stream-json``); Codex a stream of
JSONL events (``exec --json``: ``thread.started``, ``item.completed``, ``turn.completed``,
``turn.failed``, ``error``); Gemini CLI one JSON object (``session_id``, ``response``, ``stats``)
or stream-json lines (``init``, ``message``, ``result``), and when it fails a non-zero status with
a JSON object holding ``error`` on stderr (``gemini_error``). A generic command may print a line
``WORKFLOW_SESSION=<id>``. Each also gives the tool calls it reported (``calls``, one line each:
``calls.call_line``). Output is the agent's, so it is read as untrusted: a session id must
look like one, numbers must be numbers, and anything unreadable is the summary as printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from workflow.agents.calls import call_line

SESSION_LINE = re.compile(r"^WORKFLOW_SESSION=([A-Za-z0-9._:-]{1,200})\s*$", re.M)
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
USAGE_KEYS = ("input_tokens", "output_tokens")
OURS = "workflow"  # a denied tool of this name's server, or a command naming it, lost the run's work


class Report(NamedTuple):
    """What an agent's output says of its run: a summary, a session to resume, and — when the
    CLI itself reported one — why the run did not do its work ("" when it did not say)."""

    summary: str
    session: str = ""
    failed: str = ""
    usage: Mapping[str, int] = MappingProxyType({})  # input_tokens, output_tokens: what agentd counts
    cost_usd: float = 0.0
    turns: int = 0
    calls: tuple[str, ...] = ()  # the tool calls the CLI reported, in order: name(short arguments)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _session(value: object) -> str:
    text = str(value or "")
    return text if SESSION_ID.match(text) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _objects(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object on a line of its own."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                yield data


def _whole(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def plain(out: str) -> Report:
    """A generic command's output: a ``WORKFLOW_SESSION=`` line (removed from the summary), or a
    Claude-shaped result object, else the output as the summary."""
    text = out.strip()
    data = _whole(text) or next((d for d in reversed(list(_objects(text))) if d.get("type") == "result"), None)
    if data is not None and ("session_id" in data or "is_error" in data):
        return _claude(data)
    m = SESSION_LINE.search(out)
    if m:
        return Report(SESSION_LINE.sub("", out).strip() or "done", m.group(1))
    return Report(text)


def claude_report(out: str) -> Report:
    """Claude Code's result object (json), or the last ``result`` line of stream-json."""
    text = out.strip()
    data = _whole(text) or next((d for d in reversed(list(_objects(text))) if d.get("type") == "result"), None)
    if data is None:
        return Report(text[-4000:], failed="Claude Code printed no result object (was --output-format removed?)")
    return _claude(data)._replace(calls=claude_calls(text))


def claude_calls(text: str) -> tuple[str, ...]:
    """The tool calls of Claude Code's stream-json: each ``assistant`` line's ``tool_use`` blocks."""
    out = []
    for event in _objects(text):
        if event.get("type") != "assistant":
            continue
        content = _dict(event.get("message")).get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append(call_line(str(block.get("name", "?")), block.get("input")))
    return tuple(out)


def _claude(data: dict[str, Any]) -> Report:
    raw = _dict(data.get("usage"))
    usage = {k: _count(raw.get(k)) for k in USAGE_KEYS}
    cost = data.get("total_cost_usd")
    summary = str(data.get("result") or "").strip() or "done"
    return Report(
        summary,
        _session(data.get("session_id")),
        _claude_failure(data),
        usage,
        float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else 0.0,
        _count(data.get("num_turns")),
    )


def _touches_us(name: str, arguments: object) -> bool:
    detail = json.dumps(arguments) if isinstance(arguments, dict) else ""
    return name.startswith(f"mcp__{OURS}") or OURS in detail


def _claude_failure(data: dict[str, Any]) -> str:
    """Why Claude Code's result says the run did not do its work, or ""."""
    denied = data.get("permission_denials")
    if isinstance(denied, list):
        ours = [
            d for d in denied if isinstance(d, dict) and _touches_us(str(d.get("tool_name", "")), d.get("tool_input"))
        ]
        if ours:
            names = []
            for d in ours[:5]:
                arguments = _dict(d.get("tool_input"))
                detail = str(arguments.get("command") or "")[:80]
                names.append(f"{d.get('tool_name', '?')}({detail})" if detail else str(d.get("tool_name", "?")))
            return (
                f"the agent CLI denied {len(ours)} call(s) of the role's tools: {', '.join(names)} — its -p mode "
                'denies every tool it is not told to allow (backend = "claude-code" gives the role\'s tools by MCP); '
                "nothing of the run is kept"
            )
    if data.get("is_error") is True or data.get("subtype") not in (None, "success"):
        why = str(data.get("result") or data.get("subtype") or "an error")[:300]
        return f"the agent CLI reported an error: {why}"
    return ""


def codex_report(out: str) -> Report:
    """Codex's JSONL events: the thread id, the last agent message, the usage of the last
    ``turn.completed`` (Codex reports the thread's running total there, not the turn's), calls of
    the role's tools Codex refused, and a ``turn.failed`` — or an ``error`` no turn completed
    after (Codex reports a reconnect it then gets past as an ``error`` too)."""
    session, summary, failed, error = "", "", "", ""
    usage = dict.fromkeys(USAGE_KEYS, 0)
    denied: list[str] = []
    calls: list[str] = []
    turns = 0
    for event in _objects(out):
        kind = event.get("type")
        if kind == "thread.started":
            session = _session(event.get("thread_id"))
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            call = _codex_call(item)
            if call:
                calls.append(call)
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                summary = item["text"]
            elif item.get("type") == "mcp_tool_call" and item.get("server") == OURS and item.get("status") == "failed":
                why = str(_dict(item.get("error")).get("message") or "")
                if "approval" in why:
                    denied.append(f"{item.get('tool', '?')} ({why[:80]})")
        elif kind == "turn.completed":
            turns += 1
            if isinstance(event.get("usage"), dict):
                usage = {k: _count(event["usage"].get(k)) for k in USAGE_KEYS}
            error = ""
        elif kind == "turn.failed":
            failed = f"the agent CLI reported an error: {str(_dict(event.get('error')).get('message') or kind)[:300]}"
        elif kind == "error":
            error = f"the agent CLI reported an error: {str(event.get('message') or kind)[:300]}"
    if denied:
        failed = (
            f"the agent CLI denied {len(denied)} call(s) of the role's tools: {', '.join(denied[:5])} — nothing of "
            "the run is kept"
        )
    return Report(summary.strip() or "done", session, failed or error, usage, turns=turns, calls=tuple(calls))


def _codex_call(item: dict[str, Any]) -> str:
    """One completed Codex item as a tool call: an MCP tool's, a shell command, a file change."""
    kind = item.get("type")
    if kind == "mcp_tool_call":
        return call_line(f"{item.get('server', '?')}.{item.get('tool', '?')}", item.get("arguments"))
    if kind == "command_execution":
        return call_line("shell", str(item.get("command", "")))
    if kind == "file_change":
        changes = item.get("changes")
        paths = [str(_dict(c).get("path", "?")) for c in changes] if isinstance(changes, list) else []
        return call_line("edit", ", ".join(paths))
    if kind == "web_search":
        return call_line("web_search", str(item.get("query", "")))
    return ""


def codex_turns(rollout: str) -> int:
    """The model requests of a Codex session, from its rollout transcript: one ``token_count``
    event after each response (its ``exec --json`` output counts turns of the thread — one per
    prompt, however many requests it took — so a run's turns, as Claude Code and Gemini CLI count
    them, are read here)."""
    n = 0
    for event in _objects(rollout):
        if event.get("type") == "event_msg" and _dict(event.get("payload")).get("type") == "token_count":
            n += 1
    return n


def gemini_turns(chat: str) -> int:
    """The model requests of a Gemini CLI session, from its chat transcript: one ``gemini`` message
    each (written again, same id, as its tool calls are added; its stream-json output counts none)."""
    return len({str(m.get("id")) for m in _objects(chat) if m.get("type") == "gemini"})


def gemini_report(out: str) -> Report:
    """Gemini CLI's JSON object (``session_id``, ``response``, ``stats``: per model its ``tokens``
    and its ``roles``, ``main`` being the agent's own requests) or stream-json lines."""
    text = out.strip()
    data = _whole(text)
    lines = [] if data is not None else list(_objects(text))
    if data is None:
        result = next((d for d in reversed(lines) if d.get("type") == "result"), None)
        if result is None:
            return Report(text[-4000:], failed="Gemini CLI printed no result (was --output-format json removed?)")
        init = next((d for d in lines if d.get("type") == "init"), {})
        said = "".join(
            str(d.get("content", "")) for d in lines if d.get("type") == "message" and d.get("role") == "assistant"
        )
        data = {
            "session_id": init.get("session_id"),
            "response": said,
            "stats": result.get("stats"),
            "error": result.get("error") if result.get("status") not in (None, "success") else None,
        }
    usage = dict.fromkeys(USAGE_KEYS, 0)
    turns = 0
    stats = _dict(data.get("stats"))
    for model in _dict(stats.get("models")).values():  # the agent's model and the CLI's side questions' (routing…)
        tokens = _dict(_dict(model).get("tokens"))
        usage["input_tokens"] += _count(tokens.get("prompt") or tokens.get("input"))
        usage["output_tokens"] += _count(tokens.get("candidates"))
        turns += _count(_dict(_dict(_dict(model).get("roles")).get("main")).get("totalRequests"))
    if stats.get("input_tokens") or stats.get("output_tokens"):  # stream-json's flat stats
        usage = {k: _count(stats.get(k)) for k in USAGE_KEYS}
    failed = _gemini_failure(data.get("error"))
    summary = str(data.get("response") or "").strip() or "done"
    calls = tuple(
        call_line(str(d.get("tool_name", "?")), d.get("parameters")) for d in lines if d.get("type") == "tool_use"
    )
    if not calls:  # the JSON object: how many calls of each tool (no order, no arguments)
        for name, tool in _dict(_dict(stats.get("tools")).get("byName")).items():
            n = _count(_dict(tool).get("count"))
            calls += (f"{call_line(str(name), None)}" + (f" ×{n}" if n > 1 else ""),) if n else ()
    return Report(summary, _session(data.get("session_id")), failed, usage, turns=turns, calls=calls)


def _gemini_failure(error: object) -> str:
    """Gemini CLI's ``error`` (``type``, ``message``); an API error's message is the API's body."""
    if not error:
        return ""
    message = str(error.get("message") if isinstance(error, dict) else error)
    kind = error.get("type") if isinstance(error, dict) else None
    api = _dict(_dict(_whole(message.strip("[]").removeprefix("API Error: "))).get("error"))
    if isinstance(api.get("message"), str):
        message = f"the API answered {api.get('code', '?')} {api.get('status', '')}: {api['message']}"
    why = message[:300] + (f" ({kind})" if kind and kind not in ("Error", "unknown") else "")
    return f"the agent CLI reported an error: {why}"


def gemini_error(text: str) -> str:
    """Why Gemini CLI failed, from the JSON object it prints (on stderr) when it exits non-zero:
    ``{"session_id": …, "error": {"type", "message", "code"}}`` among its other lines; "" when
    there is none."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    for m in re.finditer(r"^(?:\[ERROR\] )?(?=\{)", text, re.M):
        try:
            data, _ = decoder.raw_decode(text, m.end())
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("error"):
            found = data
    return _gemini_failure(found["error"]) if found is not None else ""
