"""A local HTTP server speaking the Gemini API's wire format (generativelanguage ``v1beta``), for the
real Gemini CLI pointed at it by ``GOOGLE_GEMINI_BASE_URL`` (with any ``GEMINI_API_KEY``).

``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (the agent loop: server-sent events,
one ``GenerateContentResponse`` a ``data:`` line), ``:generateContent`` and ``:countTokens``.
A request that offers tools (``functionDeclarations``) is the agent's turn: it gets the next queued
response (``call``: the model calls a function; ``text``: it answers), or ``text("done")`` when
none is left. Anything else is a side question of the CLI's — a JSON-schema ``generateContent``
(model routing, "who speaks next", loop detection, edit correction), a summary, a token count —
and gets a plain answer built from its schema (``ANSWERS``: the user speaks next, the task is
complex, no loop), leaving the queued turns to the agent loop. Every request is recorded with the
model its URL names and its headers (``x-goog-api-key``); ``function_responses`` reads what the
CLI sent back for each call; ``tokens`` sums the usage every answer reported, as the CLI's stats do.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from helpers.wire import Served, reply

PATH = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):([A-Za-z]+)$")


class Request(NamedTuple):
    """One request the CLI made: the model and method its URL names, its body and headers."""

    model: str
    method: str  # streamGenerateContent, generateContent, countTokens…
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def tools(self) -> list[str]:
        """The names of the functions this request offers the model."""
        return [d["name"] for t in self.body.get("tools", []) for d in t.get("functionDeclarations", [])]


def text(t: str, usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A turn where the model answers text."""
    return response([{"text": t}], usage)


def call(name: str, args: dict[str, Any], usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A turn where the model calls one function (an MCP tool is ``mcp_SERVER_TOOL``)."""
    return response([{"functionCall": {"name": name, "args": args}}], usage)


def response(parts: list[dict[str, Any]], usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": usage[0] + usage[1],
        },
        "modelVersion": "gemini-fake",
        "responseId": "fake",
    }


def error(status: int, message: str = "") -> dict[str, Any]:
    """The API's error body (the CLI retries 429 and 5xx: a test wants 4xx to fail at once)."""
    kinds = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
    kinds |= {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return {"error": {"code": status, "message": message or f"fake {status}", "status": kinds.get(status, "UNKNOWN")}}


def events(payload: dict[str, Any]) -> bytes:
    """A response as the API streams it: its parts in chunks, the usage and finish on the last one."""
    candidate = payload["candidates"][0]
    parts = candidate["content"]["parts"] or [{"text": ""}]
    chunks = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        c: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [c], "modelVersion": payload.get("modelVersion", "gemini-fake")}
        if last:
            c["finishReason"] = candidate.get("finishReason", "STOP")
            chunk["usageMetadata"] = payload.get("usageMetadata", {})
        chunks.append(chunk)
    return b"".join(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks)


# what Gemini CLI 0.61's side questions get besides what their schemas allow: the user speaks next
# (the agent's turn is over); the task is complex (with no model named, its router picks its "pro"
# model rather than failing over a score below its minimum of 1); loop confidences stay 0
ANSWERS: dict[str, object] = {"next_speaker": "user", "complexity_score": 100, "model_choice": "pro"}


def answer(schema: object) -> object:
    """A plain value fitting a JSON schema: what the CLI's side questions get."""
    s = schema if isinstance(schema, dict) else {}
    kind = s.get("type")
    kind = (kind[0] if kind else None) if isinstance(kind, list) else kind
    kind = kind.lower() if isinstance(kind, str) else kind
    if s.get("enum"):
        return s["enum"][0]
    if kind == "object" or "properties" in s:
        return {key: ANSWERS.get(key, answer(sub)) for key, sub in s.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return s.get("minimum", 0)
    if kind == "boolean":
        return False
    return ""


def side(method: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to a request that is not the agent's turn."""
    if method == "countTokens":
        return {"totalTokens": 10}
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is not None:
        return text(json.dumps(answer(schema)), (10, 5))
    return text("ok", (10, 2))


def function_responses(requests: list[Request]) -> list[tuple[str, str]]:
    """(name, the response as JSON text) of every function response the CLI sent, in order, once
    each (every request carries the whole history)."""
    seen: list[tuple[str, str]] = []
    for r in requests:
        found = [
            (p["functionResponse"].get("name", ""), json.dumps(p["functionResponse"].get("response")))
            for c in r.body.get("contents", [])
            for p in c.get("parts", [])
            if isinstance(p, dict) and "functionResponse" in p
        ]
        if len(found) > len(seen):
            seen = found
    return seen


class FakeGemini(Served):
    """Answers queued turns in order; records every request (``requests``: the agent's turns,
    ``side``: the CLI's side questions)."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[Request] = []
        self.side: list[Request] = []
        self.other: list[str] = []  # requests to a path the API does not have
        self.tokens = [0, 0]  # the prompt and candidates tokens of every answer given, side questions' too
        self.lock = threading.Condition()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake.other.append(f"GET {self.path}")
                self.reply(200, {"models": []})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
                body = json.loads(raw or b"{}")
                url = urlsplit(self.path)
                m = PATH.match(url.path)
                if m is None:
                    fake.other.append(f"POST {self.path}")
                    self.reply(404, error(404, f"no such path {url.path}"))
                    return
                request = Request(unquote(m.group(1)), m.group(2), body, dict(self.headers))
                with fake.lock:
                    if request.method.lower().endswith("generatecontent") and request.tools:
                        fake.requests.append(request)
                        status, payload = fake.queue.pop(0) if fake.queue else (200, text("done"))
                    else:
                        fake.side.append(request)
                        status, payload = 200, side(request.method, body)
                    if status == 200 and "candidates" in payload:
                        payload = {**payload, "modelVersion": request.model}  # as the API does: stats are by it
                        usage = payload.get("usageMetadata", {})
                        fake.tokens[0] += usage.get("promptTokenCount", 0)
                        fake.tokens[1] += usage.get("candidatesTokenCount", 0)
                    fake.lock.notify_all()
                streamed = request.method == "streamGenerateContent" and status == 200
                self.reply(status, payload, streamed)

            def reply(self, status: int, payload: dict[str, Any], streamed: bool = False) -> None:
                data = events(payload) if streamed else json.dumps(payload).encode()
                reply(self, status, data, "text/event-stream" if streamed else "application/json")

            def log_message(self, *args: object) -> None:
                pass

        self.serve(Handler)

    def add(self, body: dict[str, Any], status: int = 200) -> None:
        self.queue.append((status, body))

    def fail(self, status: int, message: str = "") -> None:
        self.add(error(status, message), status)

    def wait(self, turns: int, timeout: float = 60) -> bool:
        """Until the agent has asked for this many turns (a CLI run in the background)."""
        with self.lock:
            return self.lock.wait_for(lambda: len(self.requests) >= turns, timeout)

    def env(self) -> dict[str, str]:
        """What points the real CLI here: its base URL and a key."""
        return {"GOOGLE_GEMINI_BASE_URL": self.url, "GEMINI_API_KEY": "fake-gemini-key"}
