"""Safe open: the one way any code reads, writes or tests an artifact file of the project.

An artifact path (``specs/proposed/user-auth.md``) is resolved with every symlink followed and
must land inside its artifact root (``<project>/specs``, itself resolved): a symlinked file or
directory that leads out of the root is refused, never read, written or even reported as
existing. The final component is then opened with ``O_NOFOLLOW`` (no symlink swapped in after the
check) and must be a regular file. Writes go through ``files.write_atomic`` (a temporary file
created with ``O_EXCL`` in the target's directory, renamed over it). Context, tools, panels,
board and guardrails all call this module.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from workflow.core.config import Config
from workflow.core.errors import ArtifactError
from workflow.core.files import write_atomic

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024  # what one artifact may be, read or written


def inside(config: Config, rel: str) -> Path:
    """The real path of a project-relative artifact path, refused unless it stays in its root."""
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or ".." in rel.split("/"):
        raise ArtifactError(f"artifact path {rel!r}: expected a relative path like specs/proposed/name.md")
    top = rel.split("/", 1)[0]
    if top not in config.artifact_roots:
        roots = ", ".join(f"{r}/" for r in config.artifact_roots)
        raise ArtifactError(f"artifact path {rel!r} is not under an artifact root ({roots})")
    root = Path(os.path.realpath(config.project_dir / top))
    real = Path(os.path.realpath(config.project_dir / rel))
    if real != root and not real.is_relative_to(root):
        raise ArtifactError(f"artifact path {rel!r} leads outside {top}/ (a symlink?); refused")
    return real


def inside_dir(config: Config, rel: str) -> bool:
    """Whether a directory path of the project stays inside its artifact root."""
    try:
        return inside(config, rel).is_dir()
    except ArtifactError:
        return False


def exists(config: Config, rel: str) -> bool:
    """Whether the artifact file exists inside its root (a symlink out answers no)."""
    try:
        return inside(config, rel).is_file()
    except ArtifactError:
        return False


def read(config: Config, rel: str, limit: int = MAX_ARTIFACT_BYTES) -> bytes:
    """Up to ``limit`` bytes of an artifact file."""
    real = inside(config, rel)
    try:
        # O_NONBLOCK: a FIFO planted as an artifact would otherwise block the open (and the run) for good
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ArtifactError(f"{rel}: no such artifact") from None
    except OSError as e:
        raise ArtifactError(f"{rel}: cannot open it: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ArtifactError(f"{rel}: not a regular file")
        return f.read(limit)


def size(config: Config, rel: str) -> int:
    return inside(config, rel).stat().st_size


def write(config: Config, rel: str, data: bytes | str, limit: int = MAX_ARTIFACT_BYTES) -> Path:
    """Replace an artifact file atomically; its directory and the file stay inside the root."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > limit:
        raise ArtifactError(f"{rel}: {len(raw)} bytes is more than the {limit} an artifact may have")
    real = inside(config, rel)
    real.parent.mkdir(parents=True, exist_ok=True)
    inside(config, rel)  # a directory made just now is still inside the root
    write_atomic(real, raw)
    return real
