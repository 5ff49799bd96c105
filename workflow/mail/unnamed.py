"""Unnamed copies: a copy written with no name in its new/ (Linux ``O_TMPFILE``), linked in once
its bytes are durable.

The classic Maildir write creates tmp/<name>, fsyncs it and renames it into new/. On ext4
without a journal the first fsync of a new file also writes its directory's block, waited for,
though tmp/ is only a place to wait in. A file with no name has no directory entry to write: its
fsync writes its data and its inode. Once that fsync returns, the
file is linked into new/ (``link``: never over an existing name). Its link count lives in its
own inode, so the file is fsynced a second time, beside its new/ directory, before anything
reports it stored: a crash before that leaves either no name, or (which ``fsck`` clears) a name
for an inode the disk still counts as unlinked — never a name for a partial file. A file no
process linked (the server killed, a failed delivery) vanishes when its descriptor closes:
nothing is left in tmp/ to clean up.

Where the system lacks any part — ``O_TMPFILE`` (another kernel or file system), ``linkat``, or
``/proc/self/fd`` (the way to link a descriptor without privilege) — ``available`` is False and
the writer uses tmp/ as before.
"""

from __future__ import annotations

import errno
import os

from workflow.mail.maildir import give_to_owner, write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

AT_FDCWD = -100  # fcntl.h
AT_SYMLINK_FOLLOW = 0x400  # ... link what /proc/self/fd/N names, not the symbolic link itself
NOT_HERE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)  # no O_TMPFILE on this system or file system


class Unnamed:
    """Writes copies with no name into a new/ directory, and links them in. Used by one thread."""

    def __init__(self) -> None:
        self._linkat: Callable[..., int] | None = None
        self._tried = False  # whether the first copy's ``_try`` worked
        if not hasattr(os, "O_TMPFILE") or not os.path.isdir("/proc/self/fd"):
            return
        import ctypes  # lazy: start-up time; only the server's committer writes unnamed copies

        try:
            fn = ctypes.CDLL(None, use_errno=True).linkat
        except (OSError, AttributeError):
            return
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        fn.restype = ctypes.c_int
        self._linkat = fn
        self._errno: Callable[[], int] = ctypes.get_errno

    @property
    def available(self) -> bool:
        return self._linkat is not None

    def write(self, box: str, data: bytes) -> int | None:
        """A file with no name in ``box``/new/ holding every byte of ``data`` (each write checked);
        its descriptor, open and unsynced. None, and ``available`` turns False, where this system
        or file system cannot make one."""
        if self._linkat is None:
            return None
        if not self._tried and not self._try(box):
            return None
        return self._write(box, data)

    def link(self, fd: int, box: str, name: str) -> str:
        """Give the file open as ``fd`` the name ``box``/new/``name`` (or, where that name is
        taken, the name with a random suffix: nothing is ever replaced); returns its path."""
        if self._linkat is None:
            raise OSError(errno.ENOSYS, "unnamed files are not available here")
        source = f"/proc/self/fd/{fd}".encode()
        target = f"{box}/new/{name}"
        for _ in range(8):
            if self._linkat(AT_FDCWD, source, AT_FDCWD, os.fsencode(target), AT_SYMLINK_FOLLOW) == 0:
                return target
            err = self._errno()
            if err != errno.EEXIST:
                raise OSError(err, os.strerror(err), target)
            target = f"{box}/new/{name}.{os.urandom(4).hex()}"
        raise OSError(errno.EEXIST, "could not find a unique file name", f"{box}/new")

    def _write(self, box: str, data: bytes) -> int | None:
        try:
            fd = os.open(f"{box}/new", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno not in NOT_HERE:
                raise
            self._linkat = None
            return None
        try:
            give_to_owner(fd, box)
            write_all(fd, data)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _try(self, box: str) -> bool:
        """Before the first copy: make an empty file with no name in ``box``/new/, link it into
        ``box``/tmp/ and remove it — whether every step works here (a container without
        /proc/self/fd, say). An error of the moment (a full disk) is raised, and the next copy
        tries again."""
        fd = self._write(box, b"")
        if fd is None:
            return False
        try:
            probe = self.link(fd, box, f"../tmp/.unnamed-{os.getpid()}-{os.urandom(4).hex()}")
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
                raise
            self._linkat = None  # /proc/self/fd is not what it should be here
            return False
        finally:
            os.close(fd)
        os.unlink(probe)
        self._tried = True
        return True
