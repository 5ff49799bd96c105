"""DB: open one of the state directory's SQLite stores — WAL, autocommit, one error type.

Every store (the index, agentd's tasks, the panels, the Slack queue) is opened here the same
way: its directory created, a 30 s busy timeout, autocommit (callers open ``BEGIN IMMEDIATE``
themselves), WAL journaling with ``synchronous=NORMAL``, and the store's schema applied. A file
SQLite cannot use raises the caller's error type naming the file and what to do.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from workflow.core.errors import WorkflowError


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
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    except OSError as e:
        raise error(f"cannot open {what} {path}: {e.strerror}") from None
    except sqlite3.DatabaseError as e:
        raise error(f"{what} {path} is unreadable ({e}); {remedy}") from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if schema:
            db.executescript(schema)
    except sqlite3.DatabaseError as e:
        db.close()
        raise error(f"{what} {path} is unreadable ({e}); {remedy}") from None
    return db
