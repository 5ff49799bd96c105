"""Modes: what the owner's processes write is the owner's alone — the umask they run with, and
finding and tightening what an older install left readable by other users.

The mail root holds every message (the Maildirs), every message's text again (the index), sealed
panel assessments, run logs and the server's state: another local user must read none of it.
Every ``workflow``, ``workflow-notify``, ``run-role`` and ``agentd`` process sets ``OWNER_UMASK``
first, so what it (and the servers, runs and agents it starts) creates is 0700 or 0600. What
matters most does not rely on that umask: the mail root, the state directory and every SQLite
store (the index with its -wal and -shm) are made 0700 and 0600 by whoever creates them
(``private_dirs``, ``private_file``), and the server and ``workflow init`` take other users'
access away from an older install's mail root as they open it (``secure``). ``loose`` finds
what grants anyone else anything under the mail root; ``tighten`` takes it away (``workflow
doctor --fix``).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # the fast path imports this module: no pathlib at run time
    from collections.abc import Iterator
    from pathlib import Path

OWNER_UMASK = 0o077
STATE_DIR = ".workflow"  # the state directory's name (``core.statedir``)
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
    """Take every permission of group and others away from ``paths`` (those that exist);
    returns how many changed."""
    done = 0
    for path in paths:
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
                continue
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
            done += 1
        except OSError:
            continue
    return done


def private_dirs(path: str | os.PathLike[str]) -> None:
    """Make the folder ``path`` and any missing parents, each 0700 whatever the umask."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # mkdir's mode is filtered through the umask


def private_file(path: str | os.PathLike[str]) -> None:
    """Make ``path`` an empty 0600 file if it is missing; take other users' access away from it
    if it is there (never through a symlink). An existing file is never opened: closing any
    descriptor of a SQLite database drops every lock this process's connections hold on it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        tighten([os.fspath(path)])
        return
    except OSError:
        return  # a folder we cannot write: the caller's own open says what is wrong
    try:
        os.fchmod(fd, 0o600)  # the umask filtered open's mode
    finally:
        os.close(fd)


def secure(mail_root: Path) -> int:
    """Take other users' access away from the mail root, its folders (the Maildirs and their
    new/, cur/ and tmp/) and everything in its state directory, as an older install may have
    left them; returns how many changed. Messages are not looked at one by one (they are
    written 0600; ``loose`` and ``workflow doctor`` check every file)."""
    root = os.fspath(mail_root)
    if not os.path.isdir(root):
        return 0
    found = [root]
    try:
        children = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        children = []
    for child in children:
        if child.name == STATE_DIR:
            found.extend(p for p, _ in _walk(child.path))
            continue
        found.append(child.path)
        try:
            found.extend(e.path for e in os.scandir(child.path) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return tighten([p for p in found if _loose(p)])


def _loose(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISLNK(st.st_mode) and bool(st.st_mode & 0o077)
