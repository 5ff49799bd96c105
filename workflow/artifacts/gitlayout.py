"""Git layout: what in a repository's ``.git`` and working tree the owner's git would obey, write
through or block on — checked before every owner-side git command (``gitcmd``), moved aside by a
failed run's rollback (``edits.planted``).

* in ``.git`` itself: a redirect (``commondir``, ``gitdir``, ``config.worktree``: another config,
  other hooks), a symlink where git writes (its lock files write through a symlinked ``index``,
  ``HEAD``, ref…), anything but a plain file or folder among git's own entries;
* anywhere in the tree (the project's ``.git`` and every embedded repository's included): a FIFO
  or a device — git opens ``.gitattributes``, ``.gitignore``, ``.mailmap``, refs, objects and an
  embedded repository's ``HEAD``, and one that is a FIFO blocks it for good —, a socket where git
  reads, a symlink among the files of a git directory (git reads and writes through it);
* a ``.git`` file (an embedded repository's git directory elsewhere) or an embedded git
  directory's ``commondir`` that points outside the tree: git reads the ``HEAD`` and refs there,
  where nothing here is checked.

A ``.git`` file at the top (a linked worktree) is git's own arrangement and is not judged. The
walk takes a few microseconds an entry, for at most ``MAX_WALKED`` entries.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

REDIRECTS = ("commondir", "gitdir", "config.worktree")  # files that point git's config and hooks elsewhere
WRITTEN_THROUGH = ("config", "index", "HEAD", "packed-refs", "hooks", "info", "refs", "objects")
GIT_DIRS = ("hooks", "info", "refs", "objects")
GIT_READS = frozenset({".gitattributes", ".gitignore", ".gitmodules", ".mailmap", ".git"})  # read by every git
POINTERS = frozenset({"commondir", "gitdir"})  # in a git directory: where its objects, refs (and worktree) are
MAX_WALKED = 200_000
MAX_POINTER = 4096  # bytes of a .git file or commondir read


class Odd(NamedTuple):
    """One thing git would obey or block on, and why."""

    path: Path
    why: str


def odd_entry(path: Path, is_dir: bool) -> str:
    """What is wrong with one of git's own entries ("" when nothing): a symlink (git writes
    through it) or something that is not a plain file or folder (a FIFO blocks git for good)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink: git would write through it"
    if not (stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)):
        return f"{path} is not a plain {'folder' if is_dir else 'file'}: git would block on it or fail"
    return ""


def top_of(cwd: Path) -> Path | None:
    """The folder holding the ``.git`` that git would find from ``cwd`` (None: none above it)."""
    for d in (cwd, *cwd.parents):
        if os.path.lexists(d / ".git"):
            return d
    return None


def git_dir_problem(top: Path) -> str:
    """What in ``top/.git`` itself is wrong ("" when nothing): a symlinked ``.git``, a redirect, a
    symlink or an odd entry among git's own entries. A few ``lstat`` calls."""
    g = top / ".git"
    if os.path.islink(g):
        return f"{g} is a symlink"
    if not os.path.isdir(g):
        return ""
    for name in REDIRECTS:
        if os.path.lexists(g / name):
            return f"{g / name} exists: it would point git at another config and other hooks"
    for name in WRITTEN_THROUGH:
        problem = odd_entry(g / name, name in GIT_DIRS)
        if problem:
            return problem
    return ""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return ""


def _pointer(path: Path, git_file: bool) -> str:
    """Where a ``.git`` file (``gitdir: X``) or a ``commondir`` points, resolved against the folder
    holding it ("" when it says nothing readable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        text = os.read(fd, MAX_POINTER).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
    if git_file:
        if not text.startswith("gitdir:"):
            return ""
        text = text[len("gitdir:") :].strip()
    return os.path.realpath(path.parent / text) if text else ""


def _within(path: str, top: str, skipped: Collection[str]) -> bool:
    inside = path == top or path.startswith(top + os.sep)
    return inside and not any(path == s or path.startswith(s + os.sep) for s in skipped)


# Folders found clean, by path: (their stamp, the folders below them, how many entries). A cache,
# not state — the one module-level mutable of this package, kept for speed: every owner-side git
# walks the tree first, and a project with a .venv inside holds 100,000 entries. It is sound: a
# folder's entries can change only by a link, unlink, rename or mknod in it, each of which sets
# its ctime, which no process can set back (utime sets ctime too); a file's type never changes
# in place. Folders holding a pointer file (a .git file, commondir), whose text matters, are
# never kept.
CLEAN: dict[str, tuple[tuple[object, ...], tuple[tuple[str, bool], ...], int]] = {}
MAX_CLEAN = 100_000
RACY_NS = 2_000_000_000  # a folder whose ctime is newer than this is never kept


def odd_entries(top: Path, skip: Collection[Path] = (), first: bool = False) -> list[Odd]:
    """Everything in the tree below ``top`` (never through a symlink, never in ``skip``: the mail
    root) that git would block on, read or write through, or follow outside the tree; with
    ``first``, only the first one."""
    out: list[Odd] = []
    real_top = os.path.realpath(top)
    skipped = {os.path.realpath(s) for s in skip}
    own_worktrees = os.path.join(real_top, ".git", "worktrees") + os.sep  # the owner's linked worktrees: elsewhere
    seen = 0
    stack: list[tuple[str, bool]] = [(real_top, False)]  # (folder, inside a git directory); no symlink on the way
    while stack and seen <= MAX_WALKED:
        folder, in_git = stack.pop()
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        stamp = (st.st_dev, st.st_ino, st.st_ctime_ns, in_git, real_top, tuple(sorted(skipped)))
        known = CLEAN.get(folder)
        if known is not None and known[0] == stamp:  # nothing was added, removed or renamed here since
            stack.extend(known[1])
            seen += known[2]
            continue
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        seen += len(entries)
        before = len(stack)
        odd = False
        for e in entries:
            found = _judge(e, folder, in_git, real_top, skipped, own_worktrees, stack)
            if found is not None:
                odd = True
                out.append(found)
                if first:
                    return out
        pointers = any(e.name == ".git" or (in_git and e.name in POINTERS) for e in entries)
        settled = st.st_ctime_ns < time.time_ns() - RACY_NS  # as git's racy-clean rule: a change within
        # the same clock tick would leave the ctime as it was, so a folder changed lately is read again
        if not odd and not pointers and settled:  # a pointer's text can change without its folder's ctime
            if len(CLEAN) >= MAX_CLEAN:
                CLEAN.clear()
            CLEAN[folder] = (stamp, tuple(stack[before:]), len(entries))
    return out


def _judge(
    e: os.DirEntry[str],
    folder: str,
    in_git: bool,
    top: str,
    skipped: Collection[str],
    own_worktrees: str,
    stack: list[tuple[str, bool]],
) -> Odd | None:
    """One entry of the walk: a folder goes on ``stack``; anything odd is returned."""
    path = e.path
    try:
        if e.is_dir(follow_symlinks=False):
            if e.path not in skipped:
                inside = (in_git or e.name == ".git") and not (in_git and e.name == "hooks")  # hooks: the owner's
                stack.append((e.path, inside))
            return None
        if e.is_file(follow_symlinks=False):
            pointer = (e.name == ".git" and folder != top) or (in_git and e.name in POINTERS)
            if not pointer or folder.startswith(own_worktrees):
                return None
            target = _pointer(Path(path), e.name == ".git")
            if target and not _within(target, top, skipped):
                return Odd(Path(path), f"{path} points git at {target}, outside the project's tree")
            return None
        if e.is_symlink():
            if in_git:
                return Odd(Path(path), f"{path} is a symlink among git's own files: git would read or write through it")
            target = os.path.realpath(path) if e.name == ".git" else top
            if not _within(target, top, skipped):
                return Odd(Path(path), f"{path} points git at {target}, outside the project's tree")
            return None
        kind = _kind(e.stat(follow_symlinks=False).st_mode)
    except OSError:
        return None
    if kind in ("a FIFO", "a device") or (kind and (in_git or e.name in GIT_READS)):
        return Odd(Path(path), f"{path} is {kind}: git would block on it for good, or fail")
    return None


def problem(cwd: Path, skip: Collection[Path] = ()) -> str:
    """Why the owner's git must not run at ``cwd`` ("" when it may): the first thing ``.git`` or
    the tree holds that git would obey, write through or block on."""
    top = top_of(cwd)
    if top is None:
        return ""
    found = git_dir_problem(top)
    if found:
        return found
    odd = odd_entries(top, skip, first=True)
    return odd[0].why if odd else ""
