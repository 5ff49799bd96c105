"""Tool server: a run's tools (``RoleTools``) offered on a Unix socket in the run's agent directory.

An agent CLI in its sandbox reaches its role's tools through ``workflow mcp`` (``agents.mcpserver``),
and a shell agent finishes with ``workflow finish``; both are clients of this server, which runs
in run-role itself, outside the sandbox, so the tools work with what the sandbox hides (the mail
root, the run's journal) exactly as the anthropic backend's do. The socket lives in the run's
own agent directory, which only that run's sandbox sees: whoever reaches it is that run's agent,
and its identity is the run's (no request names a sender or a role). Peers of another uid are
refused.

One request per connection, one JSON line each way::

    {"tool": "move_artifact", "arguments": {...}}  →  {"ok": true, "text": "moved …"}
    {"tool": "_tools"}                              →  {"ok": true, "tools": [schemas]}

Calls are served one at a time (the tools share the run's journal); a request is at most
``MAX_REQUEST`` bytes and must arrive within ``READ_TIMEOUT``; at most ``MAX_CLIENTS``
connections are open at once. The owner's git commands of a call end by the run's deadline
(``gitcmd.Scope``). When the run ends, a call still under way has ``STOP_WAIT`` seconds; then its
git commands (and a wait for the project's git lock) are stopped, the run is marked cut short
(``RoleTools.cut_short``: it fails), and the server stops waiting for it.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import threading
from pathlib import Path
from typing import Any

from workflow.agents.tools import RoleTools
from workflow.agents.toolwire import LIST, read_line
from workflow.artifacts.gitcmd import Scope
from workflow.core.errors import ToolError
from workflow.delivery import local

log = logging.getLogger(__name__)

READ_TIMEOUT = 60.0
STOP_WAIT = 5.0  # seconds a call under way when the run ends may take to finish, and again once stopped
ENDED = "the run has ended"
MAX_CLIENTS = 8


def max_request(tools: RoleTools) -> int:
    """The most bytes one request may hold: an artifact of the largest size, JSON-escaped."""
    return tools.app.config.runs.max_artifact_bytes * 6 + 65536


class ToolServer:
    """``with ToolServer(tools, path):`` serves ``tools`` at ``path`` until the block ends
    (``deadline``: the run's, as ``time.monotonic()``)."""

    def __init__(self, tools: RoleTools, path: Path, deadline: float | None = None) -> None:
        self.tools = tools
        self.git = Scope(deadline)  # the owner's git commands of the calls
        self.path = str(path)
        self.cap = max_request(tools)
        self.lock = threading.Lock()  # one call at a time
        self.open: set[socket.socket] = set()
        self.guard = threading.Lock()
        self.wake_r, self.wake_w = socket.socketpair()
        self.listener: socket.socket | None = None
        self.closed = False  # the run is ending: no call is served any more
        self.made: tuple[int, int] | None = None
        self.thread = threading.Thread(target=self._accept, name="tools", daemon=True)

    def __enter__(self) -> ToolServer:
        self.listener = local.listen(self.path, backlog=MAX_CLIENTS)
        self.made = local.identity(self.path)
        self.thread.start()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.wake_w.send(b"x")
        self.thread.join()
        self._close_calls(0.0 if kind is not None else STOP_WAIT)  # interrupted (SIGTERM): no time to give
        with self.guard:
            for conn in list(self.open):
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # a reader waiting on it wakes and goes
                except OSError:
                    pass
        if self.listener is not None:
            self.listener.close()
        local.remove(self.path, self.made)
        self.wake_r.close()
        self.wake_w.close()

    def _close_calls(self, grace: float) -> None:
        """No call starts after this; one under way ends first, or after ``grace`` is stopped."""
        held = self.lock.acquire(timeout=grace)
        if not held:  # stuck (a git on a FIFO, the owner's slow hook): its git commands are ended
            self.git.stop(ENDED)
            self.tools.cut_short = f"a tool call was still under way when the run ended and was stopped ({ENDED})"
            log.warning("%s", self.tools.cut_short)
            held = self.lock.acquire(timeout=STOP_WAIT)
        self.closed = True
        if held:
            self.lock.release()

    def _accept(self) -> None:
        assert self.listener is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ)
            sel.register(self.wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj is self.wake_r:
                        return
                    try:
                        conn, _addr = self.listener.accept()
                    except OSError:
                        continue
                    with self.guard:
                        mine = local.peer_uid(conn) == os.getuid()
                        welcome = mine and len(self.open) < MAX_CLIENTS
                        if welcome:
                            self.open.add(conn)
                    if not welcome:
                        if mine:  # the agent hears why, and may try again when a call has ended
                            busy = {"ok": False, "text": f"refused: {MAX_CLIENTS} calls are open already; wait for one"}
                            self._answer(conn, busy)
                        conn.close()
                        continue
                    threading.Thread(target=self._serve, args=(conn,), name="tool-call", daemon=True).start()

    def _close(self, conn: socket.socket) -> None:
        with self.guard:
            self.open.discard(conn)
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(READ_TIMEOUT)
            try:
                request = json.loads(read_line(conn, self.cap))
            except (ValueError, OSError, RecursionError) as e:
                self._answer(conn, {"ok": False, "text": f"refused: a bad request ({type(e).__name__}: {e})"[:500]})
                return
            self._answer(conn, self.handle(request))
        except OSError:
            pass
        finally:
            self._close(conn)

    def handle(self, request: object) -> dict[str, Any]:
        """The answer to one request (never raises for the agent's mistakes)."""
        if not isinstance(request, dict) or not isinstance(request.get("tool"), str):
            return {"ok": False, "text": 'refused: expected {"tool": NAME, "arguments": {...}}'}
        name, args = request["tool"], request.get("arguments") or {}
        if name == LIST:
            return {"ok": True, "tools": self.tools.schemas()}
        if not isinstance(args, dict):
            return {"ok": False, "text": f"refused: {name}: arguments must be an object"}
        with self.lock:
            if self.closed:
                return {"ok": False, "text": f"refused: {ENDED}"}
            try:
                with self.git.active():
                    return {"ok": True, "text": self.tools.call(name, args)}
            except ToolError as e:
                return {"ok": False, "text": f"refused: {e}"}
            except (Exception, RecursionError) as e:  # a fault of ours: the agent hears of it, the run goes on
                return {"ok": False, "text": f"failed: {type(e).__name__}: {e}"[:2000]}

    @staticmethod
    def _answer(conn: socket.socket, answer: dict[str, Any]) -> None:
        try:
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            pass
