"""A local HTTP server speaking the Messages API wire format (POST /v1/messages), for the real SDK
and for real agent CLIs (``cli=True``: Claude Code streams, and asks side questions without tools —
those get a plain answer and leave the queued turns to the agent loop)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.wire import Served, reply


def text(t: str, stop: str = "end_turn", usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    return message([{"type": "text", "text": t}], stop, usage)


def tool_use(name: str, args: dict[str, Any], tid: str = "toolu_1", usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    return message([{"type": "tool_use", "id": tid, "name": name, "input": args}], "tool_use", usage)


def message(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def events(payload: dict[str, Any]) -> bytes:
    """A message as the API streams it (server-sent events)."""
    start = {**payload, "content": [], "stop_reason": None}
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(payload["content"]):
        if block["type"] == "text":
            head, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            head, delta = (
                {**block, "input": {}},
                {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            )
        out += [
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": head}),
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]
    stop = {"stop_reason": payload["stop_reason"], "stop_sequence": None}
    out += [
        ("message_delta", {"type": "message_delta", "delta": stop, "usage": payload["usage"]}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in out)


def tool_results(requests: list[dict[str, Any]]) -> list[str]:
    """The text of every tool result a client sent back."""
    found = []
    for body in requests:
        for m in body.get("messages", []):
            for block in m["content"] if isinstance(m.get("content"), list) else []:
                if block.get("type") == "tool_result":
                    c = block.get("content")
                    found.append(c if isinstance(c, str) else json.dumps(c))
    return found


class FakeAnthropic(Served):
    """Answers queued responses in order: (status, headers, body). Records every request body."""

    def __init__(self, cli: bool = False) -> None:
        self.queue: list[tuple[int, dict[str, str], dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.on_request: Any = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if cli and ("count_tokens" in self.path or not body.get("tools")):
                    status, headers, payload = (
                        200,
                        {},
                        text("ok") if "count_tokens" not in self.path else {"input_tokens": 10},
                    )
                else:
                    fake.requests.append(body)
                    if fake.on_request is not None:
                        fake.on_request(len(fake.requests))
                    status, headers, payload = (
                        fake.queue.pop(0)
                        if fake.queue
                        else (200, {}, text("done"))
                        if cli
                        else (
                            500,
                            {},
                            {"type": "error", "error": {"type": "api_error", "message": "no response queued"}},
                        )
                    )
                streamed = bool(body.get("stream")) and status == 200 and payload.get("type") == "message"
                data = events(payload) if streamed else json.dumps(payload).encode()
                reply(self, status, data, "text/event-stream" if streamed else "application/json", headers)

            def log_message(self, *args: object) -> None:
                pass

        self.serve(Handler)

    def add(self, body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, headers or {}, body))

    def error(self, status: int, kind: str, headers: dict[str, str] | None = None) -> None:
        self.add({"type": "error", "error": {"type": kind, "message": f"fake {status}"}}, status, headers)
