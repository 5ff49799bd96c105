"""Balance: spreading ``workflow smtpd --workers`` connections over the workers.

Each worker accepts on the parent's socket; the first awake takes a connection. ``Balancer.admit``
(the protocol's gate) checks the shared connection cap, and passes a new connection that landed
on a worker while another has fewer open to that one (SCM_RIGHTS over its inbox, a Unix datagram
socket) before a byte is sent: the receiver serves it as if it had accepted it, and it counts
against the receiver from the moment it is sent (the counters' ``incoming``).
"""

from __future__ import annotations

import asyncio
import functools
import socket
from array import array
from collections.abc import Callable
from typing import Any

from workflow.delivery.server.protocol import Admission
from workflow.delivery.server.tally import CONNECTIONS, INCOMING, SERVING, WIDTH, Counters, Tally


class Balancer(Tally):
    """One worker's connection count and cap, and the connections it passes to (or is passed by)
    the others; ``lanes`` are every worker's inbox (its sending end here)."""

    def __init__(self, counters: Counters, row: int, lanes: list[socket.socket]) -> None:
        super().__init__(counters, row)
        self.row = row
        self.lanes = lanes
        self.passed: set[object] = set()  # peers passed to this worker: served here, never passed on
        self.serve: Callable[[socket.socket], asyncio.Future[Any]] | None = None
        self.tasks: set[asyncio.Future[Any]] = set()

    def keep(self, task: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """Hold a task until it is done (the loop keeps only a weak reference)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def admit(self, cap: int, transport: Any = None) -> Admission:
        if transport is None:
            return super().admit(cap, transport)
        peer = transport.get_extra_info("peername")
        if peer in self.passed:  # passed here: served here, and no longer incoming
            self.passed.discard(peer)
            with self.board.locked():
                self.incoming = max(0, self.incoming - 1)
                return self.take(cap)
        if self._pass(transport):
            return "moved"
        return super().admit(cap, transport)

    def _pass(self, transport: Any) -> bool:
        """Pass a new connection to the worker with the fewest, counting those passed to it and
        not yet taken (it counts them as incoming from the moment they are sent)."""
        sock = transport.get_extra_info("socket")
        if sock is None:
            return False
        cells, rows = self.board.cells, self.board.rows
        with self.board.locked():
            loads = [  # a row no worker serves now (one died, or is starting) is passed nothing
                cells[r * WIDTH + CONNECTIONS] + cells[r * WIDTH + INCOMING] if cells[r * WIDTH + SERVING] else 1 << 62
                for r in range(rows)
            ]
            target = min(range(rows), key=lambda r: (loads[r], r != self.row))
            if loads[target] >= loads[self.row]:
                return False
            cells[target * WIDTH + INCOMING] += 1
        try:
            self.lanes[target].sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [sock.fileno()]))])
        except OSError:  # its inbox is full (it is restarting): serve it here
            with self.board.locked():
                cells[target * WIDTH + INCOMING] = max(0, cells[target * WIDTH + INCOMING] - 1)
            return False
        return True

    def serve_passed(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        """Serve the connections passed here (their fds in ``ancillary``, from the inbox)."""
        for level, kind, data in ancillary:
            if level != socket.SOL_SOCKET or kind != socket.SCM_RIGHTS:
                continue
            for fd in array("i", data[: len(data) - len(data) % 4]):
                sock = socket.socket(fileno=fd)
                try:
                    peer = sock.getpeername()
                except OSError:  # the client has gone already
                    sock.close()
                    self._taken()
                    continue
                if self.serve is None:
                    sock.close()
                    self._taken()
                    continue
                self.passed.add(peer)
                self.serve(sock).add_done_callback(functools.partial(self._not_served, peer))

    def _taken(self, peer: object = None) -> None:
        """A connection passed here is no longer incoming: served, gone, or refused."""
        self.passed.discard(peer)
        with self.board.locked():
            self.incoming = max(0, self.incoming - 1)

    def _not_served(self, peer: object, task: asyncio.Future[Any]) -> None:
        if peer in self.passed and (task.cancelled() or task.exception() is not None):
            self._taken(peer)  # it never reached ``admit``
