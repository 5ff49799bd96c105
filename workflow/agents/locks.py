"""Locks: one lock file per running role; a lock is judged by its holder's life.

A lock records who holds it: pid, host, the boot it was taken in, the holder's start time (from
/proc, so a reused pid is not mistaken for the holder) and when it was taken. It is published
whole with ``link`` (two processes never both hold it, nobody reads it half-written). A lock
whose holder is alive is never stale, however old; one whose holder is gone is stale at once;
``ttl`` applies only when liveness cannot be judged (another host, or a lock without those
fields). A caller with a hard rule of its own (the reply loop clears a session's lock after ten
minutes, wedged or not) passes ``max_age``. Lock files live in the state directory's ``locks/``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import NamedTuple

from workflow.core.statedir import StateDir

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class LockInfo(NamedTuple):
    path: Path
    pid: int
    host: str
    started: float  # when the lock was taken (epoch seconds)
    boot: str = ""  # the boot it was taken in ("" when unknown)
    pstart: int = 0  # the holder's start time in clock ticks since boot (0 when unknown)

    @property
    def name(self) -> str:
        return self.path.stem


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> int:
    """A process's start time in clock ticks since boot (0 when it is gone or cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # the command name (field 2) may hold spaces and parentheses: fields resume after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else 0


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc to ask: the signal said it exists
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] != "Z"


def holder_alive(info: LockInfo) -> bool | None:
    """Whether the lock's holder lives: True or False when that can be told here, else None."""
    if info.host != socket.gethostname():
        return None
    if info.boot and info.boot != boot_id():
        return False  # taken before this machine last booted
    if not pid_alive(info.pid):
        return False
    if info.pstart and info.boot:
        return process_start(info.pid) == info.pstart  # a different process now has that pid
    return True


def holder(path: Path, pid: int) -> LockInfo:
    """A lock at ``path`` held by ``pid`` (this process, or a child it just spawned), taken now."""
    return LockInfo(path, pid, socket.gethostname(), time.time(), boot_id(), process_start(pid))


def dump(info: LockInfo) -> str:
    """The lock file's text."""
    return json.dumps(
        {"pid": info.pid, "host": info.host, "started": info.started, "boot": info.boot, "pstart": info.pstart}
    )


def read(path: Path) -> LockInfo | None:
    """The lock's contents; an unreadable or half-written lock reads as pid 0 (stale)."""
    try:
        st = path.stat()
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        return LockInfo(
            path,
            int(data.get("pid", 0)),
            str(data.get("host", "")),
            float(data.get("started", st.st_mtime)),
            str(data.get("boot", "")),
            int(data.get("pstart", 0)),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError):
        try:
            return LockInfo(path, 0, "", path.stat().st_mtime)
        except OSError:
            return None


def stale(info: LockInfo, ttl: float, now: float | None = None, *, max_age: float | None = None) -> str | None:
    """Why a lock is stale, or None while it is live."""
    age = (now if now is not None else time.time()) - info.started
    if info.pid == 0:
        return "unreadable lock file"
    alive = holder_alive(info)
    if alive is False:
        return f"process {info.pid} is gone"
    if max_age is not None and age > max_age:
        return f"held for {age / 60:.0f} min, longer than {max_age / 60:.0f} min"
    if alive is None and age > ttl:
        return (
            f"held for {age / 60:.0f} min by pid {info.pid} on {info.host}, whose life cannot be checked "
            f"from here, longer than lock_ttl {ttl / 60:.0f} min"
        )
    return None


def acquire(path: Path, ttl: float, *, max_age: float | None = None) -> LockInfo | None:
    """Take the lock, clearing a stale one first; None when a live process holds it.

    The lock is written whole to a private temporary file and published with ``link``, which
    fails when the lock exists: nobody ever reads a half-written lock (and takes it as stale)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        info = holder(path, os.getpid())
        tmp = path.with_name(f".{path.name}.{info.pid}.{os.urandom(4).hex()}.tmp")
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(dump(info))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            held = read(path)
            if held is not None and stale(held, ttl, max_age=max_age) is None:
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
