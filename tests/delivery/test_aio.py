"""Asynchronous fsyncs (delivery/server/aio.py): each fd's outcome, errors named, the loop free meanwhile,
more than the context holds synced all the same, and nothing submitted left behind by close."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from workflow.delivery.server import aio
from workflow.delivery.server.aio import Fsyncs

T = TypeVar("T")


def with_fsyncs(body: Callable[[Fsyncs], Awaitable[T]]) -> T:
    async def main() -> T:
        fsyncs = Fsyncs.open(asyncio.get_running_loop())
        if fsyncs is None:
            pytest.skip("no Linux AIO here (io_setup refused or not Linux x86-64/arm64)")
        try:
            return await body(fsyncs)
        finally:
            fsyncs.close()

    return asyncio.run(main())


def new_file(path: Path) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"x" * 2000)
    return fd


def test_each_fd_gets_its_outcome_and_an_fd_that_cannot_be_synced_its_error(tmp_path: Path) -> None:
    files = [new_file(tmp_path / f"m{i}") for i in range(3)]
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    r, w = os.pipe()  # a pipe cannot be synced: EINVAL, as os.fsync says

    async def body(fsyncs: Fsyncs) -> list[OSError | None]:
        return await fsyncs.fsync([*files, r, directory])

    try:
        outcome = with_fsyncs(body)
    finally:
        for fd in (*files, directory, r, w):
            os.close(fd)
    assert outcome[:3] == [None, None, None] and outcome[4] is None
    assert isinstance(outcome[3], OSError) and outcome[3].errno == errno.EINVAL


def test_the_loop_serves_others_while_the_disk_works(tmp_path: Path) -> None:
    fds = [new_file(tmp_path / f"m{i}") for i in range(8)]

    async def body(fsyncs: Fsyncs) -> tuple[bool, int, list[OSError | None]]:
        fut = fsyncs.fsync(fds)
        pending_at_once = fut.done()
        outstanding = fsyncs.outstanding
        return pending_at_once, outstanding, await fut

    try:
        done_at_once, outstanding, outcome = with_fsyncs(body)
    finally:
        for fd in fds:
            os.close(fd)
    # submitted, not waited for: the call returns before the syncs end (the kernel may finish a
    # few first; all eight rarely, so the batch is still pending)
    assert outstanding > 0 and not done_at_once
    assert outcome == [None] * 8


def test_more_than_the_context_holds_are_synced_here_and_close_waits_for_the_rest(tmp_path: Path) -> None:
    n = aio.DEPTH - 2
    fds = [new_file(tmp_path / f"m{i}") for i in range(n)]
    extra = [new_file(tmp_path / f"x{i}") for i in range(4)]

    async def body(fsyncs: Fsyncs) -> tuple[asyncio.Future[list[OSError | None]], list[OSError | None]]:
        first = fsyncs.fsync(fds)
        overflow = await fsyncs.fsync(extra)  # 4 more than fit beside the first: synced at once
        return first, overflow

    loop = asyncio.new_event_loop()
    try:
        fsyncs = Fsyncs.open(loop)
        if fsyncs is None:
            pytest.skip("no Linux AIO here")

        async def run() -> tuple[asyncio.Future[list[OSError | None]], list[OSError | None]]:
            return await body(fsyncs)

        first, overflow = loop.run_until_complete(run())
        fsyncs.close()  # reaps whatever of the first batch is still under way
        assert first.done() and first.result() == [None] * n
        assert overflow == [None] * 4
        assert fsyncs.outstanding == 0
    finally:
        loop.close()
        for fd in (*fds, *extra):
            os.close(fd)
