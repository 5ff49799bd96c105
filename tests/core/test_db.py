"""The SQLite stores' one opener: a fresh store opened by several processes at once."""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.queues import Queue
from pathlib import Path

from workflow.core.db import open_db


def _open_at(path: Path, start: float, results: Queue[str]) -> None:
    while time.time() < start:  # every process reaches the open in the same instant
        pass
    try:
        open_db(path, what="index", schema="CREATE TABLE IF NOT EXISTS t(a);").close()
        results.put("ok")
    except Exception as e:  # the test reports what the opener saw
        results.put(repr(e))


def test_a_fresh_store_opened_by_several_processes_at_once_opens_in_each(tmp_path: Path) -> None:
    """The server, agentd and a role's run often create a project's index together. Turning a new
    file to WAL needs it alone, and SQLite answers "database is locked" at once rather than wait
    for the others: the opener must retry, not report a healthy store as unreadable (it did, in
    about one start in seven with six openers)."""
    fork = multiprocessing.get_context("fork")
    for trial in range(15):
        path = tmp_path / f"{trial}" / "store.sqlite"
        results: Queue[str] = fork.Queue()
        start = time.time() + 0.2
        procs = [fork.Process(target=_open_at, args=(path, start, results)) for _ in range(6)]
        for p in procs:
            p.start()
        seen = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert seen == ["ok"] * 6, f"trial {trial + 1}: {seen}"
