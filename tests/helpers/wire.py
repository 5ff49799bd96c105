"""Wire: what the tests' stand-in HTTP services share — a loopback server in a thread of its own,
started and stopped as a context, and one whole reply (status, type, headers, body)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


def reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    data: bytes,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> None:
    """Send one whole response on ``handler``."""
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Served:
    """A stand-in service: ``serve(Handler)`` in ``__init__``, then ``with service:`` runs it."""

    server: ThreadingHTTPServer
    url: str
    thread: threading.Thread

    def serve(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
