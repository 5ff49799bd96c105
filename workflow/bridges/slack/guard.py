"""Guard: the HTTP-mode server (waitress) made to keep answering Slack under stalled connections.

waitress closes a connection only after ``channel_timeout`` of *silence* and stops accepting
when ``connection_limit`` connections are open: 200 connections that each send a header line
now and then hold every place, and Slack's signed requests wait in the kernel's backlog until
they time out. Two limits close that: each request must arrive whole (headers and body) within
``read_timeout`` seconds of its first byte (or of the connection, for one that sends nothing),
and one peer address may hold at most ``max_per_peer`` connections (more are closed at once).

waitress's internals used here (``TcpWSGIServer.handle_accept``/``maintenance``/``active_channels``,
``HTTPChannel.received``/``request``/``requests``/``will_close``) are named in ``PRIVATE_API``,
and a test checks the installed waitress still has them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from waitress.adjustments import Adjustments  # type: ignore[import-untyped]
from waitress.channel import HTTPChannel  # type: ignore[import-untyped]
from waitress.server import TcpWSGIServer  # type: ignore[import-untyped]
from waitress.task import ThreadedTaskDispatcher  # type: ignore[import-untyped]

PRIVATE_API = {
    TcpWSGIServer: ("handle_accept", "maintenance", "accept", "fix_addr", "set_socket_options", "channel_class"),
    HTTPChannel: ("received",),
}


class _Channel(HTTPChannel):  # type: ignore[misc]
    """A connection that remembers since when it has been waiting for a request to arrive whole."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.waiting_since: float | None = getattr(self, "creation_time", time.time())  # nothing arrived yet

    def received(self, data: bytes) -> bool:
        done = super().received(data)
        if self.request is None:  # every request in what came so far is whole
            self.waiting_since = None
        elif self.waiting_since is None:  # a new request began
            self.waiting_since = time.time()
        return bool(done)


class _Server(TcpWSGIServer):  # type: ignore[misc]
    channel_class = _Channel

    def __init__(self, *args: Any, read_timeout: float, max_per_peer: int, **kw: Any) -> None:
        self.read_timeout, self.max_per_peer = read_timeout, max_per_peer
        super().__init__(*args, **kw)

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
            if accepted is None:
                return
            conn, addr = accepted
            self.set_socket_options(conn)
        except OSError:
            return  # the peer went away before it was accepted
        addr = self.fix_addr(addr)
        peer = addr[0] if isinstance(addr, tuple) else addr
        held = sum(1 for c in list(self.active_channels.values()) if _peer(c) == peer)
        if held >= self.max_per_peer:
            conn.close()  # this peer holds its share of the places already
            return
        self.channel_class(self, conn, addr, self.adj, map=self._map)

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        cutoff = now - self.read_timeout
        for channel in list(self.active_channels.values()):
            since = getattr(channel, "waiting_since", None)
            if not channel.requests and since is not None and since < cutoff:
                channel.will_close = True  # a request that would not arrive whole in time


def _peer(channel: Any) -> object:
    addr = getattr(channel, "addr", None)
    return addr[0] if isinstance(addr, tuple) else addr


def missing_private_api() -> list[str]:
    """What of ``PRIVATE_API`` the installed waitress lacks."""
    return [f"{cls.__name__}.{name}" for cls, names in PRIVATE_API.items() for name in names if not hasattr(cls, name)]


def create(
    app: Callable[..., Iterable[bytes]],
    *,
    host: str,
    port: int,
    read_timeout: float,
    max_per_peer: int,
    **options: Any,
) -> Any:
    """A waitress server of ``app`` on ``host:port`` with the two limits (``options``: waitress's
    own adjustments); ``.run()`` serves, ``.close()`` stops, ``.effective_port`` is the port."""
    cleanup = min(float(options.pop("cleanup_interval", 30.0)), max(0.2, read_timeout / 4))
    adj = Adjustments(host=host, port=port, cleanup_interval=cleanup, **options)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    return _Server(
        app,
        map={},
        dispatcher=dispatcher,
        adj=adj,
        sockinfo=adj.listen[0],
        read_timeout=read_timeout,
        max_per_peer=max_per_peer,
    )
