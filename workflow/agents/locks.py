"""Locks: one lock file per running role, holding pid, host and start time; stale ones are found.

A lock is created with O_EXCL, so two processes never both hold it. It is stale when its
process is gone (same host, pid not alive) or it is older than ``lock_ttl`` — the wedged
session a reply loop can leave behind. Lock files live in the state directory: ``locks/NAME.lock``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import NamedTuple

from workflow.core.statedir import StateDir


class LockInfo(NamedTuple):
    path: Path
    pid: int
    host: str
    started: float

    @property
    def name(self) -> str:
        return self.path.stem


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(path: Path) -> LockInfo | None:
    """The lock's contents; an unreadable or half-written lock reads as pid 0 (stale)."""
    try:
        st = path.stat()
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        return LockInfo(
            path, int(data.get("pid", 0)), str(data.get("host", "")), float(data.get("started", st.st_mtime))
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError):
        try:
            return LockInfo(path, 0, "", path.stat().st_mtime)
        except OSError:
            return None


def stale(info: LockInfo, ttl: float, now: float | None = None) -> str | None:
    """Why a lock is stale, or None while it is live."""
    age = (now if now is not None else time.time()) - info.started
    if info.pid == 0:
        return "unreadable lock file"
    if info.host == socket.gethostname() and not pid_alive(info.pid):
        return f"process {info.pid} is gone"
    if age > ttl:
        return f"held for {age / 60:.0f} min, longer than lock_ttl {ttl / 60:.0f} min"
    return None


def acquire(path: Path, ttl: float) -> LockInfo | None:
    """Take the lock, clearing a stale one first; None when a live process holds it.

    The lock is written whole to a private temporary file and published with ``link``, which
    fails when the lock exists: nobody ever reads a half-written lock (and takes it as stale)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        info = LockInfo(path, os.getpid(), socket.gethostname(), time.time())
        tmp = path.with_name(f".{path.name}.{info.pid}.{os.urandom(4).hex()}.tmp")
        with open(tmp, "x", encoding="utf-8") as f:
            json.dump({"pid": info.pid, "host": info.host, "started": info.started}, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            held = read(path)
            if held is not None and stale(held, ttl) is None:
                return None
            path.unlink(missing_ok=True)
            continue
        finally:
            tmp.unlink(missing_ok=True)
        return info
    return None


def release(info: LockInfo) -> None:
    """Remove the lock if it is still ours."""
    held = read(info.path)
    if held is not None and held.pid == info.pid and held.host == info.host:
        info.path.unlink(missing_ok=True)


def scan(state: StateDir) -> list[LockInfo]:
    """Every run lock in the state directory."""
    d = state.locks
    if not d.is_dir():
        return []
    return [i for i in (read(p) for p in sorted(d.glob("*.lock"))) if i is not None]
