"""Modes: what the owner's processes write is the owner's alone — the umask they run with, and
finding and tightening what an older install left readable by other users.

The mail root holds every message (the Maildirs), every message's text again (the index), sealed
panel assessments, run logs and the server's state: another local user must read none of it.
Every ``workflow`` and ``workflow-notify`` process sets ``OWNER_UMASK`` first, so what it (and
the servers, runs and agents it starts) creates is 0700 or 0600. ``loose`` finds what grants
anyone else anything under the mail root; ``tighten`` takes it away (``workflow doctor --fix``).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # the fast path imports this module: no pathlib at run time
    from collections.abc import Iterator
    from pathlib import Path

OWNER_UMASK = 0o077
MAX_LOOKED_AT = 200_000  # entries looked at, at most (a mail root with more is checked in part)


def owner_only() -> None:
    """Make this process's new files and folders its owner's only."""
    os.umask(OWNER_UMASK)


def _walk(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """The mail root and everything under it, never through a symlink."""
    todo = [root]
    seen = 0
    while todo and seen < MAX_LOOKED_AT:
        path = todo.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        seen += 1
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            try:
                todo.extend(e.path for e in os.scandir(path))
            except OSError:
                continue


def loose(mail_root: Path) -> list[str]:
    """Files and folders under ``mail_root`` (itself included) that another user may read, write
    or enter (symlinks have no mode of their own and are left alone)."""
    if not os.path.isdir(mail_root):
        return []
    return [p for p, st in _walk(os.fspath(mail_root)) if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077]


def tighten(paths: list[str]) -> int:
    """Take every permission of group and others away from ``paths``; returns how many changed."""
    done = 0
    for path in paths:
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                continue
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
            done += 1
        except OSError:
            continue
    return done
