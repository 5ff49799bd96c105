"""Tally: the SMTP server's counters, and its connection cap — one process's, or all workers'.

A ``Tally`` counts, for one server process, the connections open, the transactions in DATA and
their outcomes. Its numbers live in a ``Counters``: an array of integers, one row per worker. A
single server has a private board of one row; ``workflow smtpd --workers N`` makes one board in a
shared memory map before it forks, so the parent reads every worker's outcomes (also a killed
worker's) and the connection cap counts every worker's connections. ``admit`` checks the cap
and takes a connection under a POSIX record lock on the board's file: the kernel releases it
when its holder dies, so a killed worker cannot leave the others locked out. A row is only
written by its own worker, with one exception: ``incoming``, the connections another worker has
passed to it and it has not yet taken, which the passer raises under that lock. The parent
clears the connections of a worker that died.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import tempfile
from array import array
from collections.abc import Iterator
from contextlib import contextmanager

from workflow.delivery.server.protocol import Admission

FIELDS = ("connections", "in_flight", "delivered", "refused", "failed", "serving", "incoming", "tells")
WIDTH = len(FIELDS)
CONNECTIONS, SERVING, INCOMING, TELLS = (FIELDS.index(f) for f in ("connections", "serving", "incoming", "tells"))
CELL = 8  # bytes of one signed 64-bit count


class Counters:
    """Rows of counts, private (one process) or shared with forked workers (``shared``)."""

    def __init__(self, rows: int = 1, *, shared: bool = False) -> None:
        self.rows = rows
        self.fd: int | None = None
        if shared:
            with tempfile.TemporaryFile(prefix="workflow-smtpd-") as f:
                self.fd = os.dup(f.fileno())  # unlinked already; lives while a process holds it
            os.ftruncate(self.fd, rows * WIDTH * CELL)
            self._map: mmap.mmap | None = mmap.mmap(self.fd, rows * WIDTH * CELL)  # MAP_SHARED
            self.cells = memoryview(self._map).cast("q")
        else:
            self._map = None
            self.cells = memoryview(array("q", [0] * (rows * WIDTH)))

    def tally(self, row: int) -> Tally:
        return Tally(self, row)

    def total(self, field: str) -> int:
        i = FIELDS.index(field)
        return sum(self.cells[r * WIDTH + i] for r in range(self.rows))

    def clear(self, row: int, *fields: str) -> None:
        """Zero these counts of a row (the parent, for a worker that died holding connections)."""
        for f in fields:
            self.cells[row * WIDTH + FIELDS.index(f)] = 0

    @contextmanager
    def locked(self) -> Iterator[None]:
        if self.fd is None:
            yield
            return
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)


class _Count:
    """One field of a tally's row, read and written as an attribute."""

    def __init__(self, field: str) -> None:
        self.offset = FIELDS.index(field)

    def __get__(self, obj: Tally, owner: type | None = None) -> int:
        return int(obj.board.cells[obj.base + self.offset])

    def __set__(self, obj: Tally, value: int) -> None:
        obj.board.cells[obj.base + self.offset] = value


class Tally:
    """One server process's counts (a row of a board) and the cap check for its connections."""

    connections = _Count("connections")
    in_flight = _Count("in_flight")
    delivered = _Count("delivered")
    refused = _Count("refused")
    failed = _Count("failed")
    serving = _Count("serving")  # the pid of the worker serving this row (0: none now)
    incoming = _Count("incoming")  # passed to this row's worker by another, not yet taken
    tells = _Count("tells")  # how many times this row's worker has told the others of copies

    def __init__(self, board: Counters | None = None, row: int = 0) -> None:
        self.board = board or Counters()
        self.base = row * WIDTH

    def admit(self, cap: int, transport: object = None) -> Admission:
        """Serve a new connection if fewer than ``cap`` are open on the whole board."""
        with self.board.locked():
            return self.take(cap)

    def take(self, cap: int) -> Admission:
        """``admit``'s check and count, for a caller that holds the board's lock."""
        if self.board.total("connections") >= cap:
            return "full"
        self.connections += 1
        return "serve"

    def release(self) -> None:
        self.connections -= 1
