"""Receive: Slack's events through Bolt for Python, in Socket Mode or over HTTP.

Socket Mode (``mode = "socket"``, or ``auto`` with the app-level token set): the bridge opens a
websocket to Slack (``apps.connections.open``) — no public URL, what a local tool needs. HTTP
mode: Bolt's WSGI adapter on waitress, a production server with a request-size limit
(``max_body``: 413), an idle-connection timeout (``request_timeout``), a connection cap
(``max_connections``), a deadline for each request to arrive whole (``read_timeout``) and a cap
per peer address (``max_per_peer``), so stalled connections cannot starve Slack (``guard``). A
signature header that is not ``v0=`` + hex, or a timestamp that is not a number, is refused (401) before Bolt sees the request. Bolt verifies the signature (a 5-minute
window), answers ``url_verification`` and acknowledges each event at once; the listener hands
the event to the bridge (``Bridge.receive``), which ignores retries already received, the bot's
own messages and channels other than the configured one. A listener's error is one log line;
the bridge goes on. ``replay`` feeds recorded payloads through ``Bridge.receive`` and posts the
answers already in the bridge's mailbox; the questions it asks are answered by agentd.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from workflow.bridges.slack.bridge import Bridge
from workflow.core.errors import ConfigError

if TYPE_CHECKING:
    from slack_bolt import App as BoltApp

PATH = "/slack/events"
WINDOW = 300
SIGNATURE_RE = re.compile(r"^v0=[0-9a-f]{64}$")


def mode(bridge: Bridge) -> str:
    """``socket`` or ``http``: ``auto`` is Socket Mode when the app-level token is set."""
    if bridge.s.mode == "auto":
        return "socket" if bridge.keys.app_token else "http"
    return bridge.s.mode


class _Say(logging.Handler):
    """Bolt's and waitress's warnings as the bridge's one-line log, no tracebacks."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        self.say(f"{record.name}: {record.getMessage().splitlines()[0][:300]}")


def _logger(name: str, say: Callable[[str], None]) -> logging.Logger:
    log = logging.getLogger(name)
    log.propagate = False
    log.setLevel(logging.WARNING)
    if not any(isinstance(h, _Say) for h in log.handlers):
        log.addHandler(_Say(say))
    return log


def bolt_app(bridge: Bridge, http: bool) -> BoltApp:
    """The Bolt app: one listener for every event type, handing each to the bridge."""
    from slack_bolt import App  # lazy: only the Slack bridge loads Bolt

    app = App(
        client=bridge.client,
        signing_secret=bridge.keys.signing_secret if http else None,
        request_verification_enabled=http,
        token_verification_enabled=False,
        ignoring_self_events_enabled=False,  # the bridge filters its own bot (bot_user_id, bot_id)
        logger=_logger("slack_bolt", bridge.say),
    )

    @app.event(re.compile(r".+"))
    def on_event(body: dict[str, Any], request: Any) -> None:
        retry = (request.headers.get("x-slack-retry-num") or [None])[0] if request is not None else None
        bridge.receive(body, retry)

    @app.error
    def on_error(error: Exception) -> None:
        bridge.say(f"an event was not handled: {type(error).__name__}: {error}")

    return app


def serve(bridge: Bridge, ready: Callable[[str], None]) -> None:
    """Receive until the bridge stops: Socket Mode or HTTP, then the bridge's loop."""
    if mode(bridge) == "socket":
        _socket(bridge, ready)
    else:
        _http(bridge, ready)


def _socket(bridge: Bridge, ready: Callable[[str], None]) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler  # lazy: only Socket Mode loads it

    if not bridge.keys.app_token:
        raise ConfigError(f"Socket Mode needs ${bridge.s.app_token_env} (the app-level token, xapp-…)")
    handler = SocketModeHandler(
        bolt_app(bridge, http=False),
        bridge.keys.app_token,
        web_client=bridge.client,
        logger=_logger("slack_sdk.socket_mode", bridge.say),
    )
    handler.connect()  # type: ignore[no-untyped-call]
    ready("connected to Slack in Socket Mode")
    try:
        bridge.loop()
    finally:
        handler.close()  # type: ignore[no-untyped-call]


def _http(bridge: Bridge, ready: Callable[[str], None]) -> None:
    # lazy: only HTTP mode loads the WSGI adapter and waitress
    from slack_bolt.adapter.wsgi import SlackRequestHandler
    from slack_sdk.signature import SignatureVerifier

    from workflow.bridges.slack import guard  # lazy: waitress, which only HTTP mode needs

    if not bridge.keys.signing_secret:
        raise ConfigError(f"${bridge.s.signing_secret_env} is not set: every HTTP request must be verified")
    handler = SlackRequestHandler(bolt_app(bridge, http=True), PATH)

    verifier = SignatureVerifier(bridge.keys.signing_secret)

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        why = None
        if environ.get("PATH_INFO") == PATH and environ.get("REQUEST_METHOD") == "POST":
            why = _malformed(environ)
            if why is None:  # waitress has the whole body (within max_body): check it, hand Bolt a copy
                body = environ["wsgi.input"].read()
                environ["wsgi.input"] = io.BytesIO(body)
                environ["CONTENT_LENGTH"] = str(len(body))
                headers = {
                    "x-slack-signature": environ["HTTP_X_SLACK_SIGNATURE"],
                    "x-slack-request-timestamp": environ["HTTP_X_SLACK_REQUEST_TIMESTAMP"],
                }
                if not verifier.is_valid_request(body, headers):
                    why = "bad X-Slack-Signature"
                else:
                    odd = _odd_shape(body)
                    if odd is not None:  # genuine but unusable: acknowledged (no retries), said once
                        bridge.say(f"a signed request ignored: {odd}")
                        start_response("200 OK", [("Content-Type", "text/plain")])
                        return [b""]
        if why is not None:
            bridge.say(f"refused a request from {environ.get('REMOTE_ADDR', '?')}: {why}")
            start_response("401 Unauthorized", [("Content-Type", "text/plain")])
            return [why.encode()]
        return handler(environ, start_response)

    _logger("waitress", bridge.say)
    server = guard.create(
        wsgi,
        host=bridge.s.host,
        port=bridge.s.port,
        read_timeout=bridge.s.read_timeout,
        max_per_peer=bridge.s.max_per_peer,
        max_request_body_size=bridge.s.max_body,
        channel_timeout=bridge.s.request_timeout,
        cleanup_interval=max(0.5, min(30.0, bridge.s.request_timeout / 2)),
        connection_limit=bridge.s.max_connections,
        threads=4,
        expose_tracebacks=False,
        ident="workflow-slack",
    )
    port = server.effective_port
    threading.Thread(target=server.run, daemon=True, name="slack-http").start()
    ready(f"listening on http://{bridge.s.host}:{port}{PATH}")
    try:
        bridge.loop()
    finally:
        server.close()


def _malformed(environ: dict[str, Any]) -> str | None:
    """Why a request's Slack headers cannot be genuine, before anything reads them further."""
    sig = environ.get("HTTP_X_SLACK_SIGNATURE", "")
    ts = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", "")
    if not sig:
        return "no X-Slack-Signature"
    if not SIGNATURE_RE.match(sig):
        return "bad X-Slack-Signature (not v0= and 64 hex digits)"
    if not ts.isascii() or not ts.isdigit():
        return "missing or bad X-Slack-Request-Timestamp"
    if abs(time.time() - int(ts)) > WINDOW:
        return f"timestamp {ts} is outside the {WINDOW // 60}-minute replay window"
    return None


def _odd_shape(body: bytes) -> str | None:
    """Why a verified body is not something Bolt can route (not a JSON object, an event callback
    without an event object), or None. Form-encoded bodies (interactions) pass through."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None if body[:1] not in (b"[", b"{") else "not JSON"
    if not isinstance(payload, dict):
        return f"a JSON {type(payload).__name__}, not an object"
    if payload.get("type") == "event_callback":
        ev = payload.get("event")
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            return f"event {payload.get('event_id', '?')} has no event object"
    return None


def replay(bridge: Bridge, path: str) -> int:
    """Feed recorded payloads (a JSON array, or one JSON object per line) through the bridge."""
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    payloads = json.loads(text) if text.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    n = sum(1 for p in payloads if isinstance(p, dict) and bridge.receive(p))
    bridge.drain()
    return n
