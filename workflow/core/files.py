"""Files: write a small file whole or not at all — the one helper for state, queue and artifact files.

A private temporary file in the target's directory is created exclusively (``O_EXCL``: never a
file or symlink someone planted), written, fsynced and renamed over the target; then the
directory is fsynced, so after a crash the target holds the old bytes or the new ones, never a
mix, and the rename itself survives. Maildir delivery has its own batched path (mail.maildir).
"""

from __future__ import annotations

import os

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


def write_atomic(path: Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) atomically and durably."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
