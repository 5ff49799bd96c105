"""Files: write a small file whole or not at all — the one helper for state, queue and artifact files.

A private temporary file in the target's directory is created exclusively (``O_EXCL``: never a
file or symlink someone planted), written, fsynced and renamed over the target (``write_atomic``)
or linked to it when it must not exist yet (``create_atomic``: the first of several racing
processes wins); then the directory is fsynced, so after a crash the target holds the old bytes
or the new ones, never a mix, and the rename itself survives. Maildir delivery has its own batched path (mail.maildir).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def fsync_dir(path: Path | str) -> None:
    """Make the directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path, data: bytes | str, *, mode: int = 0o644, sync_dir: bool = True, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) atomically and durably (``sync_dir=False``:
    the caller fsyncs the directory once after several writes, before it relies on them;
    ``durable=False``: atomic only, for a file nothing needs after a crash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    d = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        tmp = temp_in(d, path.name, data, mode, durable)
        try:
            os.rename(tmp, path.name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            os.unlink(tmp, dir_fd=d)
            raise
        if sync_dir and durable:
            os.fsync(d)
    finally:
        os.close(d)


def create_atomic(path: Path, data: bytes | str, *, mode: int = 0o600) -> None:
    """Make ``path`` hold ``data``, whole, unless it exists (FileExistsError): written under a
    temporary name, then ``link(2)``ed to ``path``, which never replaces a file. Processes racing
    to make the same file never see it partial, and the first link wins for all of them."""
    d = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        tmp = temp_in(d, path.name, data, mode, True)
        try:
            os.link(tmp, path.name, src_dir_fd=d, dst_dir_fd=d, follow_symlinks=False)
        finally:
            os.unlink(tmp, dir_fd=d)
        os.fsync(d)
    finally:
        os.close(d)


def temp_in(folder: int, name: str, data: bytes | str, mode: int, durable: bool) -> str:
    """The name of a private temporary file made (``O_EXCL``: never one someone planted) in the
    folder whose fd is ``folder``, holding ``data`` (fsynced when ``durable``), beside ``name``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = f".{name[:200]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=folder)
        raise
    os.close(fd)
    return tmp


UNTRUSTED = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # no symlink followed, no FIFO waited on


def read_untrusted(path: Path, limit: int) -> bytes | None:
    """The bytes of a file someone else may have planted (an agent's run directory): ``None``
    unless it is a regular file, reached without a symlink at its last step, of at most
    ``limit`` bytes. Never blocks (a FIFO is refused) and never reads more than ``limit + 1``."""
    try:
        fd = os.open(path, os.O_RDONLY | UNTRUSTED)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def append_untrusted(path: Path, text: str) -> bool:
    """Append to a file someone else may have replaced: only a regular file reached without a
    symlink (never a FIFO, a device, or a symlink to the owner's files). False when refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | UNTRUSTED)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.write(fd, text.encode("utf-8"))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
