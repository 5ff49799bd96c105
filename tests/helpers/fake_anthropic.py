"""A local HTTP server speaking the Messages API wire format (POST /v1/messages), for the real SDK."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


class FakeAnthropic:
    """Answers queued responses in order: (status, headers, body). Records every request body."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, dict[str, str], dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.on_request: Any = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                fake.requests.append(body)
                if fake.on_request is not None:
                    fake.on_request(len(fake.requests))
                status, headers, payload = (
                    fake.queue.pop(0)
                    if fake.queue
                    else (500, {}, {"type": "error", "error": {"type": "api_error", "message": "no response queued"}})
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.queue.append((status, headers or {}, body))

    def error(self, status: int, kind: str, headers: dict[str, str] | None = None) -> None:
        self.add({"type": "error", "error": {"type": kind, "message": f"fake {status}"}}, status, headers)

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
