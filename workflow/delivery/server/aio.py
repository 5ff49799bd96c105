"""AIO: fsyncs the event loop does not wait in — Linux AIO, its completions watched by the loop.

A worker's event loop used to block in each round's fsyncs, one after another: its clients
waited for the disk, and so did the work the loop had for everyone else. Here a round's fsyncs
are submitted together (``io_submit`` of ``IOCB_CMD_FSYNC``, which the kernel runs on its own
threads, side by side: a virtual disk serves several syncs in about the time of one), the kernel
counts each completion on an eventfd, and the loop, watching it, reaps them and resolves the
round's future. No thread of ours, so no interpreter lock is handed over; the fsync is the same
``vfs_fsync`` a blocking call makes, and its error is reported the same way.

Only where the calls exist (Linux; a seccomp filter or ``fs.aio-max-nr`` may refuse
``io_setup``): ``Fsyncs.open`` returns None elsewhere and the caller blocks in ``os.fsync``.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import sys
from collections.abc import Callable, Sequence

DEPTH = 256  # fsyncs one loop may have submitted and not reaped
IOCB_CMD_FSYNC = 2
IOCB_FLAG_RESFD = 1
# x86-64 and arm64 system call numbers (the only architectures it is switched on for)
# (io_setup, io_destroy, io_getevents, io_submit)
CALLS = (("x86_64", (206, 207, 208, 209)), ("aarch64", (0, 1, 4, 2)))


class _Iocb(ctypes.Structure):
    _fields_ = [
        ("aio_data", ctypes.c_uint64),
        ("aio_key", ctypes.c_uint32),
        ("aio_rw_flags", ctypes.c_int32),
        ("aio_lio_opcode", ctypes.c_uint16),
        ("aio_reqprio", ctypes.c_int16),
        ("aio_fildes", ctypes.c_uint32),
        ("aio_buf", ctypes.c_uint64),
        ("aio_nbytes", ctypes.c_uint64),
        ("aio_offset", ctypes.c_int64),
        ("aio_reserved2", ctypes.c_uint64),
        ("aio_flags", ctypes.c_uint32),
        ("aio_resfd", ctypes.c_uint32),
    ]


class _Event(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_uint64),
        ("obj", ctypes.c_uint64),
        ("res", ctypes.c_int64),
        ("res2", ctypes.c_int64),
    ]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


Outcome = list[OSError | None]  # per fd: None when synced, else the fsync's error


class _Batch:
    """One ``fsync`` call's requests: their outcomes, how many are left, who waits."""

    __slots__ = ("future", "iocbs", "left", "outcome")

    def __init__(self, future: asyncio.Future[Outcome], n: int) -> None:
        self.future = future
        self.outcome: Outcome = [None] * n
        self.left = n
        self.iocbs = (_Iocb * n)()  # kept alive until the kernel is done with them

    def settle(self) -> None:
        """Resolve the future once no request is left."""
        if self.left == 0 and not self.future.done():
            self.future.set_result(self.outcome)


class Fsyncs:
    """One event loop's asynchronous fsyncs (one AIO context, one eventfd)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, syscall: Callable[..., int], calls: tuple[int, ...]) -> None:
        self._loop = loop
        self._syscall = syscall
        self._setup, self._destroy, self._getevents, self._submit = calls
        self._ctx = ctypes.c_ulong(0)
        if syscall(self._setup, DEPTH, ctypes.byref(self._ctx)) != 0:
            raise OSError(ctypes.get_errno(), "io_setup")
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._events = (_Event * DEPTH)()
        self._zero = _Timespec(0, 0)
        self._pending: dict[int, tuple[_Batch, int]] = {}  # a request's aio_data: its batch, its place
        self._next = 0
        loop.add_reader(self._efd, self._reap)

    @classmethod
    def open(cls, loop: asyncio.AbstractEventLoop) -> Fsyncs | None:
        """The loop's asynchronous fsyncs, or None where this system has none to offer."""
        calls = dict(CALLS).get(os.uname().machine)
        if sys.platform != "linux" or calls is None or not hasattr(os, "eventfd"):
            return None
        try:
            syscall = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            return None
        syscall.restype = ctypes.c_long
        try:
            return cls(loop, syscall, calls)
        except OSError:
            return None

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def fsync(self, fds: Sequence[int]) -> asyncio.Future[Outcome]:
        """Sync every fd; the future's outcome says, per fd, None or the error. An fd may be
        closed once this returns (the kernel holds its file until the sync is done)."""
        fut: asyncio.Future[Outcome] = self._loop.create_future()
        batch = _Batch(fut, len(fds))
        if not fds:
            batch.settle()
            return fut
        if len(self._pending) + len(fds) > DEPTH:
            batch.left = 0
            self._block(batch, fds, 0)  # more than the context holds: wait here, as without AIO
            return fut
        pointers = (ctypes.POINTER(_Iocb) * len(fds))()
        for i, fd in enumerate(fds):
            cb = batch.iocbs[i]
            self._next += 1
            cb.aio_data = self._next
            cb.aio_lio_opcode = IOCB_CMD_FSYNC
            cb.aio_fildes = fd
            cb.aio_flags = IOCB_FLAG_RESFD
            cb.aio_resfd = self._efd
            pointers[i] = ctypes.pointer(cb)
            self._pending[self._next] = (batch, i)
        done = self._syscall(self._submit, self._ctx, len(fds), pointers)
        if done < len(fds):  # refused, wholly or in part: sync the rest here
            first = max(done, 0)
            for i in range(first, len(fds)):
                del self._pending[batch.iocbs[i].aio_data]
            batch.left -= len(fds) - first
            self._block(batch, fds, first)
        return fut

    def _block(self, batch: _Batch, fds: Sequence[int], first: int) -> None:
        """Sync ``fds[first:]`` here, blocking (the requests the kernel was not given)."""
        for i in range(first, len(fds)):
            try:
                os.fsync(fds[i])
            except OSError as e:
                batch.outcome[i] = e
        batch.settle()

    def _reap(self, wait: bool = False) -> None:
        """Take every completed sync (``wait``: until none is left) and resolve finished batches."""
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass
        while self._pending:
            got = self._syscall(
                self._getevents,
                self._ctx,
                len(self._pending) if wait else 0,
                min(len(self._pending), DEPTH),
                self._events,
                None if wait else ctypes.byref(self._zero),
            )
            if got < 0:
                if ctypes.get_errno() == errno.EINTR:
                    continue
                raise OSError(ctypes.get_errno(), "io_getevents")
            if got == 0:
                return
            for ev in self._events[:got]:
                batch, i = self._pending.pop(ev.data)
                if ev.res < 0:
                    batch.outcome[i] = OSError(-ev.res, os.strerror(-ev.res))
                batch.left -= 1
                batch.settle()
            if not wait:
                return

    def close(self) -> None:
        """Wait for every sync submitted, resolve its batch, and release the context."""
        self._loop.remove_reader(self._efd)
        if self._pending:
            self._reap(wait=True)
        self._syscall(self._destroy, self._ctx)
        os.close(self._efd)
