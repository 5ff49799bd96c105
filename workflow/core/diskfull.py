"""Disk full: one line naming the file system that is full and what waits for space — never a traceback.

A full disk is an outcome the owner can act on (free space), not a bug: run-role, agentd and the
server say which file system is full (its mount point and what is free), what is kept (nothing
half written: every durable write is a temporary file renamed into place), and what waits until
there is room. SQLite's "database or disk is full" counts too.
"""

from __future__ import annotations

import errno
import os
import sqlite3

from workflow.core.errors import DiskFullError, WorkflowError

FULL = (errno.ENOSPC, errno.EDQUOT)
SQLITE_FULL = 13
LOW = 1 << 20  # bytes free below which a file system counts as full


def is_full(e: BaseException | None) -> bool:
    """Whether ``e`` (or what caused it) says the disk or the quota is full."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, OSError) and e.errno in FULL:
            return True
        if isinstance(e, sqlite3.Error) and getattr(e, "sqlite_errorcode", None) == SQLITE_FULL:
            return True
        if "No space left on device" in str(e) or "database or disk is full" in str(e):
            return True  # a child's message carried up (git's "fatal: … No space left on device")
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def no_room(path: str | os.PathLike[str]) -> bool:
    """Whether the file system ``path`` is on has (next to) no room left: what SQLite reports
    as a "disk I/O error" when its journal cannot grow is a full disk then."""
    try:
        st = os.statvfs(mount_point(path))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < LOW


def mount_point(path: str | os.PathLike[str]) -> str:
    """The mount point of the file system ``path`` is on (of its nearest existing folder)."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    dev = os.stat(p).st_dev
    while os.path.dirname(p) != p and os.stat(os.path.dirname(p)).st_dev == dev:
        p = os.path.dirname(p)
    return p


def line(e: BaseException, where: str | os.PathLike[str] | None, waits: str) -> str:
    """``no space left on the file system at /srv (12 KiB free, writing /srv/x): WAITS``."""
    name = getattr(e, "filename", None) or where
    if name is None:
        return f"no space left on a file system: {waits}"
    try:
        mount = mount_point(name)
        st = os.statvfs(mount)
        free = f"{st.f_bavail * st.f_frsize // 1024} KiB free"
    except OSError:
        mount, free = str(name), "free space unknown"
    return f"no space left on the file system at {mount} ({free}, writing {name}): {waits}"


def full(path: str | os.PathLike[str], e: BaseException) -> DiskFullError:
    return DiskFullError(line(e, path, "nothing was changed; try again once there is room"))


def unreadable(
    error: type[WorkflowError], what: str, path: str | os.PathLike[str], e: sqlite3.DatabaseError, remedy: str
) -> WorkflowError:
    """The error for a store SQLite cannot use: a full disk when it is one (no rebuild would
    help), else ``error`` naming the file and ``remedy``."""
    if is_full(e) or ("disk I/O error" in str(e) and no_room(path)):
        return full(path, e)
    return error(f"{what} {path} is unreadable ({e}); {remedy}")
