"""MCP server: ``workflow mcp`` — a run's tools for an agent CLI, over stdio.

The agent CLI (Claude Code, Codex, Gemini CLI) starts ``python -I -m workflow mcp --tools SOCKET``
inside the run's sandbox, with the run's own interpreter, so PATH does not matter, and waits for
its tool list before it sends its first request to the model. This process holds no identity and
no rule of its own: it lists the tools the run's tool server offers (``agents.toolserver``: the
same tools, names and schemas as the anthropic backend's, read-only for a panel member) and
relays each call there, outside the sandbox, where run-role checks it as its role. A refused call
comes back as an error result the agent can read and act on.

The protocol is the Model Context Protocol's stdio transport: one JSON-RPC 2.0 message per line
each way. A tools-only server needs four methods of it — ``initialize``, ``ping``, ``tools/list``
and ``tools/call`` — so it is spoken here with the standard library alone, which makes the
server ready in tens of milliseconds where the SDK's imports took 0.6–1.6 s of every run's start
(docs/performance.md). ``cli.fast`` starts it without click. The official SDK's client is what
the tests speak to it with (tests/agents/test_mcp_server.py), besides the real CLIs.
"""

from __future__ import annotations

import json
import sys
import threading

from workflow.agents.toolwire import LIST, call

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

NAME = "workflow"
INSTRUCTIONS = "The tools of your workflow-mail role. End your run with finish."
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
MAX_LINE = 64 << 20  # bytes of one message from the client
# JSON-RPC's error codes
PARSE_ERROR, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602


def no_run(path: str, e: BaseException) -> str:
    """What ``workflow mcp`` says when no run answers at ``path``."""
    return f"no run answers at {path}: {e} (the run ended, or this is not a run's socket)"


def tools_of(socket_path: str) -> list[dict[str, Any]]:
    """The MCP tool list of the run at ``socket_path``; OSError when no run is there."""
    try:
        answer = call(socket_path, LIST, timeout=30.0)
    except ValueError as e:
        raise OSError(str(e)) from None
    schemas = answer.get("tools")
    if not isinstance(schemas, list):
        raise OSError(f"the run's tool server at {socket_path} did not list its tools")
    return [
        {"name": s["name"], "description": s.get("description", ""), "inputSchema": s["input_schema"]} for s in schemas
    ]


class Session:
    """One client on ``stdin``/``stdout``: ``serve()`` answers it until it closes stdin."""

    def __init__(self, socket_path: str, tools: list[dict[str, Any]], stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.path = socket_path
        self.tools = tools
        self.stdin = stdin
        self.stdout = stdout
        self.lock = threading.Lock()  # one message written at a time (calls answer from threads)
        self.cancelled: set[object] = set()
        self.calls: list[threading.Thread] = []

    def serve(self) -> None:
        while True:
            line = self.stdin.readline(MAX_LINE + 1)
            if not line:  # the client is done: the calls it made are made before this ends
                for t in self.calls:
                    t.join()
                return
            if len(line) > MAX_LINE:
                self.send({"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": "too long"}})
                while line and not line.endswith(b"\n"):  # the rest of that message
                    line = self.stdin.readline(MAX_LINE)
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError) as e:
                self.send({"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": str(e)[:500]}})
                continue
            for m in message if isinstance(message, list) else [message]:
                self.receive(m)

    def receive(self, message: object) -> None:
        """Act on one message: answer a request, note a notification, ignore a response."""
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return  # a response to a request of ours: we send none
            self.send({"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": "not a request"}})
            return
        method, params, rid = message["method"], message.get("params") or {}, message.get("id")
        if "id" not in message:  # a notification: initialized, cancelled, progress …
            if method == "notifications/cancelled" and isinstance(params, dict):
                self.cancelled.add(params.get("requestId"))
            return
        if not isinstance(params, dict):
            self.error(rid, INVALID_PARAMS, "params must be an object")
        elif method == "initialize":
            asked = params.get("protocolVersion")
            self.result(
                rid,
                {
                    "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": NAME, "version": "1"},
                    "instructions": INSTRUCTIONS,
                },
            )
        elif method == "ping":
            self.result(rid, {})
        elif method == "tools/list":
            self.result(rid, {"tools": self.tools})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if not isinstance(name, str) or not isinstance(args, dict):
                self.error(rid, INVALID_PARAMS, "tools/call needs a name and an arguments object")
            else:  # in a thread: a call may take minutes, while the client may ping meanwhile
                t = threading.Thread(target=self.relay, args=(rid, name, args), daemon=True)
                t.start()
                self.calls = [c for c in self.calls if c.is_alive()] + [t]
        else:
            self.error(rid, NO_METHOD, f"method not found: {method}")

    def relay(self, rid: object, name: str, args: dict[str, Any]) -> None:
        """Make the call at the run's tool server and answer it with what the run said."""
        try:
            answer = call(self.path, name, args)
        except (OSError, ValueError) as e:
            answer = {"ok": False, "text": f"failed: the run's tool server did not answer ({e}); your run has ended"}
        if rid in self.cancelled:
            return  # the client gave up on it: no answer (the call itself was made)
        text = str(answer.get("text", json.dumps(answer)))
        self.result(rid, {"content": [{"type": "text", "text": text}], "isError": not answer.get("ok")})

    def result(self, rid: object, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def error(self, rid: object, code: int, text: str) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}})

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"  # ASCII-escaped: never a newline inside
        with self.lock:
            try:
                self.stdout.write(data)
                self.stdout.flush()
            except (OSError, ValueError):
                pass  # the client went: stdin's end says so to serve()


def serve(socket_path: str) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin; OSError when no run answers at
    ``socket_path`` (its tool list is read first, so a CLI never starts without its tools)."""
    Session(socket_path, tools_of(socket_path), sys.stdin.buffer, sys.stdout.buffer).serve()
