"""A local HTTP server speaking Slack's Web API wire format; records every call (method, params)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.rate_limit_next = 0  # answer this many calls with 429 + Retry-After first
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                ctype = self.headers.get("Content-Type", "")
                params = (
                    json.loads(body) if "json" in ctype else {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
                )
                method = self.path.rsplit("/", 1)[-1]
                if fake.rate_limit_next > 0:
                    fake.rate_limit_next -= 1
                    data = json.dumps({"ok": False, "error": "ratelimited"}).encode()
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                else:
                    fake.calls.append((method, params))
                    data = json.dumps(
                        {"ok": True, "ts": "1700000000.000200", "channel": params.get("channel", "")}
                    ).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, method: str) -> list[dict[str, Any]]:
        return [p for m, p in self.calls if m == method]

    def reactions(self, ts: str) -> list[str]:
        return [p["name"] for m, p in self.calls if m == "reactions.add" and p.get("timestamp") == ts]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
