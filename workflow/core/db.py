"""DB: open one of the state directory's SQLite stores — WAL, autocommit, one error type.

Every store (the index, agentd's tasks, the panels, the Slack queue) is opened here the same
way: its directory created, a 30 s busy timeout, autocommit (callers open ``BEGIN IMMEDIATE``
themselves), WAL journaling with ``synchronous=NORMAL``, and the store's schema applied. A file
SQLite cannot use raises the caller's error type naming the file and what to do (a full disk
is a ``DiskFullError`` naming the file system: no rebuild would help). Every store
holds what only the owner may read: its folders are made 0700 and the file 0600 whatever the
umask (``core.modes``), and SQLite gives its -wal and -shm files the database's own mode.

Turning a new file to WAL needs it alone, and SQLite answers "database is locked" at once to a
process that asks while another has it open, without waiting out the busy timeout; the server,
agentd and a role's run often create a project's index together, so that answer is retried
(``wal``) until the busy timeout, like any other lock.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from workflow.core import diskfull, modes
from workflow.core.errors import WorkflowError

BUSY_TIMEOUT = 30.0  # how long a store waits for another process's lock


def open_db(
    path: Path,
    *,
    what: str,
    schema: str = "",
    error: type[WorkflowError] = WorkflowError,
    remedy: str = "move it aside and start again",
) -> sqlite3.Connection:
    """A connection to ``path`` (``what`` names the store in errors), usable from several
    threads; callers serialise their own writes."""
    try:
        modes.private_dirs(path.parent)
        modes.private_file(path)
        # an older install's, made with a looser mode (never created here: SQLite owns them)
        modes.tighten([str(path.with_name(path.name + suffix)) for suffix in ("-wal", "-shm")])
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
    except OSError as e:
        if diskfull.is_full(e):
            raise diskfull.full(path, e) from None
        raise error(f"cannot open {what} {path}: {e.strerror}") from None
    except sqlite3.DatabaseError as e:
        raise diskfull.unreadable(error, what, path, e, remedy) from None
    try:
        wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
        if schema:
            db.executescript(schema)
    except sqlite3.DatabaseError as e:
        db.close()
        raise diskfull.unreadable(error, what, path, e, remedy) from None
    return db


def wal(db: sqlite3.Connection) -> None:
    """Switch ``db`` to WAL journaling, waiting (``BUSY_TIMEOUT`` at most) while another process
    holds the new file."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
