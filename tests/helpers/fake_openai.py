"""A local HTTP server speaking the OpenAI Responses API wire format, for the real Codex CLI.

What Codex 0.171.0 does at the wire (base URL ``…/v1`` given by ``-c openai_base_url=…``, the key
by CODEX_API_KEY as ``Authorization: Bearer``): ``GET {base}/responses`` asking to upgrade to a
WebSocket — answered 426 here, and Codex falls back at once to ``POST {base}/responses`` with
``stream: true``, answered with the queued turn as server-sent events the way the API sends them
(``response.created``, ``response.in_progress``, ``response.output_item.added``, text or
argument deltas, ``response.output_item.done``, ``response.completed`` with usage). Codex sends
the tools in ``tools`` (``function`` tools and ``namespace`` tools holding functions: an MCP
server's tools are the namespace ``mcp__<server>``), or — for a model of its catalog whose tool
mode is ``code_mode_only``, its default one among them — in an ``additional_tools`` input item:
a freeform tool ``exec`` that runs JavaScript calling ``tools.mcp__<server>__<tool>(args)``.

Every request body is recorded (``requests``) with its headers (``headers``); anything else
asked (``GET {base}/models``…) is answered — an empty list, or 404 — and noted in ``other``. A
turn asked for when none is queued gets ``text("done")``."""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.wire import Served, reply

IDS = itertools.count(1)
Turn = tuple[int, dict[str, str], dict[str, Any]]
FIELDS = {  # a call item's field the API streams, and its events' name
    "function_call": ("arguments", "function_call_arguments"),
    "custom_tool_call": ("input", "custom_tool_call_input"),
}


def text(t: str, usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A turn where the model answers text."""
    part = {"type": "output_text", "text": t, "annotations": []}
    item = {"id": f"msg_{next(IDS)}", "type": "message", "status": "completed", "role": "assistant", "content": [part]}
    return response([item], usage)


def call(
    name: str, args: dict[str, Any], call_id: str, namespace: str = "", usage: tuple[int, int] = (10, 5)
) -> dict[str, Any]:
    """A turn where the model calls the function ``name`` (of the tool ``namespace`` it is in, if
    any: Codex offers an MCP server's tools as the namespace ``mcp__<server>``)."""
    item = {
        "id": f"fc_{next(IDS)}",
        "type": "function_call",
        "status": "completed",
        "name": name,
        "arguments": json.dumps(args),
        "call_id": call_id,
        **({"namespace": namespace} if namespace else {}),
    }
    return response([item], usage)


def custom(name: str, source: str, call_id: str, usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A turn where the model calls the freeform tool ``name`` with ``source`` as its input."""
    item = {
        "id": f"ctc_{next(IDS)}",
        "type": "custom_tool_call",
        "status": "completed",
        "name": name,
        "input": source,
        "call_id": call_id,
    }
    return response([item], usage)


def response(output: list[dict[str, Any]], usage: tuple[int, int]) -> dict[str, Any]:
    """A whole response object, as ``response.completed`` carries it."""
    return {
        "id": f"resp_{next(IDS)}",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "",
        "output": output,
        "usage": {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage[0] + usage[1],
        },
    }


def events(payload: dict[str, Any], model: str) -> bytes:
    """A response as the API streams it (server-sent events), for the model asked for."""
    done = {**payload, "model": model}
    start = {**done, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for i, item in enumerate(payload["output"]):
        at = {"item_id": item["id"], "output_index": i}
        if item["type"] == "message":
            out.append({"type": "response.output_item.added", "output_index": i, "item": {**item, "content": []}})
            for j, part in enumerate(item["content"]):
                pos = {**at, "content_index": j}
                out += [
                    {"type": "response.content_part.added", **pos, "part": {**part, "text": ""}},
                    {"type": "response.output_text.delta", **pos, "delta": part["text"], "logprobs": []},
                    {"type": "response.output_text.done", **pos, "text": part["text"], "logprobs": []},
                    {"type": "response.content_part.done", **pos, "part": part},
                ]
        else:  # a call: its arguments (a function's JSON, a freeform tool's input) stream in
            field, kind = FIELDS[item["type"]]
            head = {**item, "status": "in_progress", field: ""}
            out += [
                {"type": "response.output_item.added", "output_index": i, "item": head},
                {"type": f"response.{kind}.delta", **at, "delta": item[field]},
                {"type": f"response.{kind}.done", **at, field: item[field]},
            ]
        out.append({"type": "response.output_item.done", "output_index": i, "item": item})
    out.append({"type": "response.completed", "response": done})
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(out)
    )


def tool_outputs(requests: list[dict[str, Any]]) -> dict[str, str]:
    """The text of every tool output a client sent back, by call id (a request carries the whole
    conversation, so a later one repeats the earlier outputs)."""
    found: dict[str, str] = {}
    for body in requests:
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
                out = item.get("output")
                if isinstance(out, list):  # content items: input_text…
                    out = "\n".join(str(p.get("text", "")) for p in out if isinstance(p, dict))
                found[str(item.get("call_id"))] = out if isinstance(out, str) else json.dumps(out)
    return found


def offered(body: dict[str, Any]) -> set[str]:
    """The tools one request offers the model, a namespace's as ``namespace.name``: from ``tools``
    and from any ``additional_tools`` input item."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += item.get("tools") or []
    names = set()
    for t in tools:
        if t.get("type") == "namespace":
            names |= {f"{t.get('name')}.{s.get('name')}" for s in t.get("tools") or []}
        else:
            names.add(str(t.get("name") or t.get("type")))
    return names


class FakeOpenAI(Served):
    """Answers queued turns in order: (status, headers, body). Records every turn asked for."""

    def __init__(self) -> None:
        self.queue: list[Turn] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.other: list[str] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle(self) -> None:
                try:
                    super().handle()
                except ConnectionError:  # the client went away between keep-alive requests
                    pass

            def do_GET(self) -> None:
                with fake.lock:
                    fake.other.append(f"GET {self.path}")
                if self.headers.get("upgrade", "").lower() == "websocket":
                    self.reply(426, {"error": {"message": "use HTTPS", "type": "invalid_request_error"}})
                elif self.path.split("?")[0].endswith("/models"):
                    self.reply(200, {"object": "list", "data": [], "models": []})
                else:
                    self.reply(404, {"error": {"message": f"no {self.path}", "type": "invalid_request_error"}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                if self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1] != "responses":
                    with fake.lock:
                        fake.other.append(f"POST {self.path}")
                    self.reply(404, {"error": {"message": f"no {self.path}", "type": "invalid_request_error"}})
                    return
                body = json.loads(raw or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    status, headers, payload = fake.queue.pop(0) if fake.queue else (200, {}, text("done"))
                if status != 200:
                    self.reply(status, payload, headers)
                    return
                reply(self, 200, events(payload, str(body.get("model") or "gpt-fake")), "text/event-stream", headers)

            def reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                reply(self, status, json.dumps(payload).encode(), "application/json", headers)

            def log_message(self, *args: object) -> None:
                pass

        self.serve(Handler, "/v1")

    def add(self, body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, headers or {}, body))

    def error(self, status: int, kind: str, headers: dict[str, str] | None = None) -> None:
        """A turn the API refuses, as it does: ``{"error": {"type", "message", …}}``."""
        self.add({"error": {"type": kind, "message": f"fake {status}", "code": None, "param": None}}, status, headers)
