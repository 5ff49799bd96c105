"""Beneath: the one way owner-side code touches a path an agent can write — resolved from a folder fd, no symlink followed.

An agent with a shell can turn any folder of the project into a symlink and back, thousands of
times a second (``renameat2(RENAME_EXCHANGE)``), so a path checked with ``realpath`` and then
opened by name may be the owner's ``~/.claude`` by the time it is opened. Here a path is never
opened by name from the top: it is split into its components (lexically: no ``..``, no ``.``,
no empty or absolute part) and walked from a folder the owner opened (the project), one
component at a time, with no symlink followed anywhere on the way — ``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` where the kernel has it, else ``O_NOFOLLOW |
O_DIRECTORY`` per component. What is read, written, renamed or removed is then done relative
to the final folder's fd, so a folder swapped after that changes nothing: the fd is the folder
that was resolved, and its entries are the project's.

Every refusal that depends on what is on disk (missing, a symlink on the way, not a folder, not
a regular file) is one ``UnreachableError``: a caller that answers an agent says the same for all.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from workflow.core.errors import ArtifactError
from workflow.core.files import temp_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks the open
RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x02, 0x04, 0x08
SYS_OPENAT2 = 437  # the same number on every architecture Linux gave it (since 5.6)
RENAME_NOREPLACE = 1
AT_FDCWD = -100
Top = str | os.PathLike[str]  # a folder the owner names (the project): trusted as given
MAX_DEPTH = 64  # folders below a walk's start that are walked; a deeper chain is an agent's, left unwalked
UNREACHABLE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EXDEV, errno.EAGAIN, errno.ENXIO, errno.EISDIR)


class UnreachableError(ArtifactError):
    """The path is not there as a plain file or folder reached without a symlink (its text says which,
    for the owner's logs; an agent is told only that nothing is there). ``code``: the errno, if any."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


@functools.cache
def _libc() -> Any:
    import ctypes  # lazy: start-up time (the server's locate imports this module)

    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def kernel_resolves() -> bool:
    """Whether ``openat2`` works here (Linux 5.6+, not refused by a seccomp filter)."""
    try:
        fd = _openat2(AT_FDCWD, ".", DIR_FLAGS)
    except OSError:
        return False
    os.close(fd)
    return True


@functools.cache
def _how() -> Any:
    """``struct open_how`` (flags, mode, resolve: three u64)."""
    import ctypes  # lazy: start-up time (the server's locate imports this module)

    class How(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    return How


def _openat2(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    import ctypes  # lazy: start-up time (the server's locate imports this module)

    how = _how()(
        flags, mode if flags & os.O_CREAT else 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
    )
    syscall = _libc().syscall
    syscall.restype = ctypes.c_long
    fd = syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return int(fd)


def parts(rel: str) -> list[str]:
    """The components of a relative path, refused (ArtifactError, before anything is touched)
    unless each is a plain name."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel or "\\" in rel:
        raise ArtifactError(f"path {rel!r}: expected a relative path like specs/proposed/name.md")
    out = rel.split("/")
    if any(p in ("", ".", "..") for p in out):
        raise ArtifactError(f"path {rel!r}: every part must be a name ('..', '.' and empty parts are not allowed)")
    return out


def _walk(top: int, names: list[str], create: bool, kernel: bool) -> int:
    """The fd of the folder ``top/names…`` (made when ``create``), no symlink followed."""
    if not names:
        return os.dup(top)
    if kernel and not create:
        return _openat2(top, "/".join(names), DIR_FLAGS)
    fd = os.dup(top)
    try:
        for name in names:
            try:
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened below, refused if it is not a plain folder
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def folder(top: Top, rel: str | list[str], *, create: bool = False, kernel: bool | None = None) -> Iterator[int]:
    """``with folder(project, "specs/todo") as fd:`` — the folder's fd, resolved beneath ``top``
    with no symlink followed (UnreachableError otherwise); ``create`` makes missing folders."""
    names = parts(rel) if isinstance(rel, str) else rel
    use_kernel = kernel_resolves() if kernel is None else kernel
    base = os.open(top, DIR_FLAGS & ~os.O_NOFOLLOW)  # the owner's own path: trusted as given
    try:
        try:
            fd = _walk(base, names, create, use_kernel)
        except OSError as e:
            if e.errno in UNREACHABLE:
                why = f"{'/'.join(names)}: not a folder reached without a symlink ({e.strerror})"
                raise UnreachableError(why, e.errno) from None
            raise
    finally:
        os.close(base)
    try:
        yield fd
    finally:
        os.close(fd)


def split(rel: str) -> tuple[list[str], str]:
    names = parts(rel)
    return names[:-1], names[-1]


def lstat(top: Top, rel: str) -> os.stat_result | None:
    """What is at ``rel`` (not followed if a symlink), or None when it is not there or is reached
    only through a symlink or a non-folder."""
    up, name = split(rel)
    try:
        with folder(top, up) as d:
            return os.stat(name, dir_fd=d, follow_symlinks=False)
    except (UnreachableError, FileNotFoundError, NotADirectoryError):
        return None


def is_file(top: Top, rel: str) -> bool:
    st = lstat(top, rel)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_dir(top: Top, rel: str) -> bool:
    st = lstat(top, rel)
    return st is not None and stat.S_ISDIR(st.st_mode)


def through_link(top: Top, rel: str) -> bool:
    """Whether a folder on the way to ``rel`` is a symlink or no folder (what is there is not the project's)."""
    up, _ = split(rel)
    try:
        with folder(top, up):
            return False
    except UnreachableError as e:
        return e.code != errno.ENOENT


@contextmanager
def opened(top: Top, rel: str, flags: int = READ_FLAGS) -> Iterator[int]:
    """An fd of the regular file at ``rel`` (UnreachableError for anything else: a symlink, a FIFO, a folder)."""
    up, name = split(rel)
    with folder(top, up) as d:
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=d)
        except OSError as e:
            if e.errno in UNREACHABLE:
                raise UnreachableError(f"{rel}: not a file reached without a symlink ({e.strerror})", e.errno) from None
            raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreachableError(f"{rel}: not a regular file")
        yield fd
    finally:
        os.close(fd)


def read(top: Top, rel: str, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of the file at ``rel`` and its whole size."""
    with opened(top, rel) as fd:
        size = os.fstat(fd).st_size
        chunks, want = [], limit
        while want > 0:
            chunk = os.read(fd, min(want, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            want -= len(chunk)
        return b"".join(chunks), size


def write(
    top: Top, rel: str, data: bytes, *, mode: int = 0o644, create_parents: bool = True, durable: bool = True
) -> None:
    """Replace the file at ``rel`` with ``data`` atomically: a private temporary file made with
    ``O_EXCL`` in the resolved folder, fsynced, renamed over the name there, the folder fsynced."""
    up, name = split(rel)
    with folder(top, up, create=create_parents) as d:
        tmp = temp_in(d, name, data, mode, durable)
        try:
            there = _entry(d, name)
            if there is not None and not stat.S_ISREG(there.st_mode):  # a symlink, a FIFO, a folder: not replaced
                raise UnreachableError(f"{rel}: something other than a regular file is there", errno.EEXIST)
            os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            os.unlink(tmp, dir_fd=d)
            raise
        if durable:
            os.fsync(d)


def _entry(d: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=d, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove(top: Top, rel: str) -> bool:
    """Remove the entry at ``rel`` (a file or a symlink itself; never what a symlink names). False
    when nothing was there to remove."""
    up, name = split(rel)
    try:
        with folder(top, up) as d:
            os.unlink(name, dir_fd=d)
            return True
    except (UnreachableError, FileNotFoundError):
        return False


def rename(top: Top, src: str, dst: str, *, create_parents: bool = True) -> None:
    """Move the entry at ``src`` to ``dst`` (never over something already there), both resolved
    beneath ``top`` with no symlink followed."""
    s_up, s_name = split(src)
    d_up, d_name = split(dst)
    with folder(top, s_up) as s, folder(top, d_up, create=create_parents) as d:
        _rename_noreplace(s, s_name, d, d_name)
        os.fsync(d)
        if s_up != d_up:
            os.fsync(s)


def _rename_noreplace(sfd: int, sname: str, dfd: int, dname: str) -> None:
    fn = getattr(_libc(), "renameat2", None)
    if fn is not None:
        r = fn(sfd, os.fsencode(sname), dfd, os.fsencode(dname), RENAME_NOREPLACE)
        if r == 0:
            return
        e = _libc_errno()
        if e not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(e, os.strerror(e), dname)
    # no renameat2 (an old kernel or file system): a regular file is linked (which never replaces)
    # and then unlinked; anything else is refused rather than moved over something
    st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "only a regular file can be moved here", sname)
    os.link(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
    os.unlink(sname, dir_fd=sfd)


def _libc_errno() -> int:
    import ctypes  # lazy: start-up time (the server's locate imports this module)

    return int(ctypes.get_errno())


def walk(
    top: Top, rel: str | list[str] = "", *, max_depth: int = MAX_DEPTH
) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk`` of ``top/rel`` from its folder fd, top-down: each folder listed through the fd
    it was entered by (never through a symlink swapped in meanwhile, and no symlink descended
    into), and no deeper than ``max_depth`` folders below the start (a chain of nested folders an
    agent made never exhausts the recursion or the fds). Yields (the folder relative to the
    start, "" for the start; its folders, which a caller may prune; its files; its fd)."""
    names = ([] if not rel else parts(rel)) if isinstance(rel, str) else rel
    with folder(top, names) as fd:
        for dirpath, dirs, files, dfd in os.fwalk(".", dir_fd=fd):
            here = "" if dirpath == "." else dirpath[2:]
            if here and here.count("/") + 1 >= max_depth:
                dirs[:] = []
            yield here, dirs, files, dfd


def mkdirs(top: Top, rel: str) -> None:
    """Make the folder ``rel`` (and those above it) beneath ``top``, through no symlink."""
    with folder(top, rel, create=True):
        pass
