"""Slack at the wire: a local HTTP server speaking the Web API's format (records every call: method,
params) and a websocket server speaking Socket Mode (hello, event envelopes, the client's acks)."""

from __future__ import annotations

import itertools
import json
import queue
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.rate_limit_next = 0  # answer this many calls with 429 + Retry-After first
        self.channel_names: dict[str, str] = {}  # channel id → name, for conversations.info
        self.acks: list[str] = []  # Socket Mode: envelope ids the client acknowledged
        self.outbox: queue.Queue[str] = queue.Queue()  # Socket Mode: envelopes to push
        self.sockets = 0  # Socket Mode: connections opened
        self._ids = itertools.count(1)
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
                    data = json.dumps(fake.answer(method, params)).encode()
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
        from websockets.sync.server import serve

        self.ws = serve(self._socket, "127.0.0.1", 0, compression=None)
        self.ws_url = f"ws://127.0.0.1:{self.ws.socket.getsockname()[1]}/link"
        threading.Thread(target=self.ws.serve_forever, daemon=True).start()

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "apps.connections.open":
            return {"ok": True, "url": self.ws_url}
        if method == "conversations.info":
            cid = str(params.get("channel", ""))
            return {"ok": True, "channel": {"id": cid, "name": self.channel_names.get(cid, "general")}}
        return {"ok": True, "ts": "1700000000.000200", "channel": params.get("channel", "")}

    # -- Socket Mode

    def _socket(self, ws: Any) -> None:
        self.sockets += 1
        ws.send(json.dumps({"type": "hello", "num_connections": 1, "debug_info": {"host": "fake"}}))
        while True:
            try:
                env = self.outbox.get(timeout=0.05)
                ws.send(env)
            except queue.Empty:
                pass
            except Exception:
                return
            try:
                got = ws.recv(timeout=0)
            except TimeoutError:
                continue
            except Exception:
                return
            envelope = json.loads(got).get("envelope_id") if got else None
            if envelope:
                self.acks.append(str(envelope))

    def push(self, payload: dict[str, Any]) -> str:
        """Send an Events API payload down the socket; returns its envelope id."""
        eid = f"env-{next(self._ids)}"
        self.outbox.put(
            json.dumps(
                {"type": "events_api", "envelope_id": eid, "payload": payload, "accepts_response_payload": False}
            )
        )
        return eid

    def of(self, method: str) -> list[dict[str, Any]]:
        return [p for m, p in self.calls if m == method]

    def reactions(self, ts: str) -> list[str]:
        return [p["name"] for m, p in self.calls if m == "reactions.add" and p.get("timestamp") == ts]

    def close(self) -> None:
        self.ws.shutdown()
        self.server.shutdown()
        self.server.server_close()
