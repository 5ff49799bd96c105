"""Tool wire: how a client talks to a run's tool server (``agents.toolserver``) — one JSON line each way.

``call(path, tool, arguments)`` sends ``{"tool": NAME, "arguments": {...}}`` and returns the
server's answer, ``{"ok": bool, "text": …}`` (``{"ok": true, "tools": [schemas]}`` for ``LIST``).
The clients — ``workflow mcp`` (``agents.mcpserver``) and ``workflow finish`` — start inside an
agent's sandbox at every run, so this module imports the standard library and the socket helper
only: their start is the agent CLI's wait for its tools.
"""

from __future__ import annotations

import json

from workflow.delivery import local

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

LIST = "_tools"  # the request for the run's tool schemas


def read_line(conn: socket.socket, cap: int) -> bytes:
    """One line from ``conn`` (without its newline); ValueError past ``cap`` bytes or at EOF."""
    buf = bytearray()
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the connection closed before a whole line")
        end = chunk.find(b"\n")
        if end >= 0:
            buf += chunk[:end]
            return bytes(buf)
        buf += chunk
        if len(buf) > cap:
            raise ValueError(f"a request of more than {cap} bytes")


def call(path: str, tool: str, arguments: dict[str, Any] | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """One request to the tool server at ``path``; OSError when none answers there, ValueError
    for an answer that is not a JSON object."""
    with local.connect(path, timeout) as sock:
        sock.sendall(json.dumps({"tool": tool, "arguments": arguments or {}}).encode() + b"\n")
        answer = json.loads(read_line(sock, 1 << 30))
    if not isinstance(answer, dict):
        raise ValueError("the tool server's answer is not an object")
    return answer
