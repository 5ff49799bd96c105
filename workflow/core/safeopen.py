"""Safe open: the one way any code reads, writes or tests an artifact file of the project.

An artifact path (``specs/proposed/user-auth.md``) is first judged by its text alone — a relative
path of plain names under an artifact root — before anything on disk is looked at, so a refusal
never tells whether a file exists. It is then resolved by ``core.beneath`` from the project's
folder, one component at a time, with no symlink followed anywhere (a symlinked file or folder
is no artifact, wherever it points); what is read or written is done relative to the folder fd
that resolution gave, so a folder an agent swaps for a symlink between a check and a use is
never gone through. Writes are atomic (a private ``O_EXCL`` temporary file renamed over the
name). Context, tools, panels, board and guardrails all call this module.
"""

from __future__ import annotations

from workflow.core import beneath
from workflow.core.config import Config
from workflow.core.errors import ArtifactError

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024  # what one artifact may be, read or written


def check(config: Config, rel: str) -> str:
    """``rel`` when its text names a path under an artifact root; ArtifactError otherwise (nothing
    on disk is looked at)."""
    beneath.parts(rel)
    top = rel.split("/", 1)[0]
    if top not in config.artifact_roots:
        roots = ", ".join(f"{r}/" for r in config.artifact_roots)
        raise ArtifactError(f"artifact path {rel!r} is not under an artifact root ({roots})")
    return rel


def inside_dir(config: Config, rel: str) -> bool:
    """Whether a directory path of the project is a folder of its artifact root, reached through no symlink."""
    try:
        return beneath.is_dir(config.project_dir, check(config, rel))
    except ArtifactError:
        return False


def exists(config: Config, rel: str) -> bool:
    """Whether the artifact file exists, reached through no symlink."""
    try:
        return beneath.is_file(config.project_dir, check(config, rel))
    except ArtifactError:
        return False


def read_sized(config: Config, rel: str, limit: int = MAX_ARTIFACT_BYTES) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of an artifact file, and its whole size (one open: the two agree)."""
    try:
        return beneath.read(config.project_dir, check(config, rel), limit)
    except beneath.UnreachableError:
        raise ArtifactError(f"{rel}: no such artifact") from None
    except OSError as e:
        raise ArtifactError(f"{rel}: cannot read it: {e.strerror}") from None


def read(config: Config, rel: str, limit: int = MAX_ARTIFACT_BYTES) -> bytes:
    """Up to ``limit`` bytes of an artifact file."""
    return read_sized(config, rel, limit)[0]


def write(config: Config, rel: str, data: bytes | str, limit: int = MAX_ARTIFACT_BYTES) -> None:
    """Replace an artifact file atomically, in its folder as resolved through no symlink (made if missing)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > limit:
        raise ArtifactError(f"{rel}: {len(raw)} bytes is more than the {limit} an artifact may have")
    try:
        beneath.write(config.project_dir, check(config, rel), raw)
    except beneath.UnreachableError:
        raise ArtifactError(f"{rel}: cannot write there (a symlink, or no folder, on the way)") from None
    except IsADirectoryError:
        raise ArtifactError(f"{rel}: a folder is there") from None
