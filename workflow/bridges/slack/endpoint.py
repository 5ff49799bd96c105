"""Endpoint: Slack's Events API over HTTP — every request verified, acknowledged at once.

Each request's ``X-Slack-Signature`` is checked (v0 HMAC-SHA256 of ``v0:{timestamp}:{body}`` with
the signing secret, a 5-minute window); a bad or stale one gets 401 and a log line, and nothing
is queued. ``url_verification`` is answered; an event already received (Slack's retries) is
ignored; every other event is queued for the bridge's loop and answered 200 at once.
``replay`` feeds recorded payloads through the same path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from workflow.bridges.slack.bridge import Bridge

WINDOW = 300
MAX_BODY = 1 << 20


def signature_ok(secret: str, timestamp: str, body: bytes, signature: str, now: float | None = None) -> str | None:
    """None when the request is genuine and fresh, else why not."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return "missing or bad X-Slack-Request-Timestamp"
    if abs((now if now is not None else time.time()) - ts) > WINDOW:
        return f"timestamp {ts} is outside the {WINDOW // 60}-minute replay window"
    expected = "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not signature or not hmac.compare_digest(expected, signature):
        return "bad X-Slack-Signature"
    return None


def make_handler(bridge: Bridge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: bytes = b"", ctype: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._reply(413, b"too large")
                return
            body = self.rfile.read(length)
            why = signature_ok(
                bridge.keys.signing_secret,
                self.headers.get("X-Slack-Request-Timestamp", ""),
                body,
                self.headers.get("X-Slack-Signature", ""),
            )
            if why:
                bridge.say(f"refused a request from {self.client_address[0]}: {why}")
                self._reply(401, why.encode())
                return
            try:
                payload = json.loads(body)
            except ValueError:
                self._reply(400, b"not JSON")
                return
            if payload.get("type") == "url_verification":
                self._reply(200, json.dumps({"challenge": payload.get("challenge", "")}).encode(), "application/json")
                return
            event_id = str(payload.get("event_id") or "")
            if event_id and bridge.store.seen(event_id):
                retry = self.headers.get("X-Slack-Retry-Num")
                bridge.say(f"event {event_id} already received" + (f" (retry {retry})" if retry else "") + "; ignored")
                self._reply(200, b"ok")
                return
            bridge.events.put(payload)
            bridge.wake.set()
            self._reply(200, b"ok")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def serve(bridge: Bridge, ready: Callable[[int], None]) -> None:
    recovered = bridge.store.recover()
    if recovered:
        bridge.say(f"{recovered} task(s) left running by a crash are queued again")
    server = ThreadingHTTPServer((bridge.s.host, bridge.s.port), make_handler(bridge))
    threading.Thread(target=server.serve_forever, daemon=True, name="slack-http").start()
    ready(server.server_address[1])
    try:
        bridge.loop()
    finally:
        server.shutdown()
        server.server_close()


def replay(bridge: Bridge, path: str) -> int:
    """Feed recorded payloads (a JSON array, or one JSON object per line) through the same path."""
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    payloads = json.loads(text) if text.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    bridge.store.recover()
    n = 0
    for p in payloads:
        event_id = str(p.get("event_id") or "")
        if event_id and bridge.store.seen(event_id):
            continue
        bridge.events.put(p)
        n += 1
    bridge.drain()
    return n
