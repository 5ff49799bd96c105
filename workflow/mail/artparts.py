"""Artifact parts: the copy of an artifact (and its diff) a notification carries for people.

A review-request, an approval or a rejection carries, after its body, the artifact's text as an
inline ``text/plain`` part (its head and a note when it is larger than ``INLINE_LIMIT``, a note
alone when it is not text) and, when it was reviewed before, the unified diff against that
version twice: inline (``text/plain``, so every pager shows it) and as a ``text/x-diff``
attachment. Every such part is marked ``X-Workflow-Copy: artifact`` or ``diff``
(``mail.body.COPY_HEADER``): an agent's readers drop them (an agent reads the artifact from
the tree), the cockpit's thread page shows them. Composing them is ``delivery.artcopy``; this
module builds and reads the parts and does no I/O.
"""

from __future__ import annotations

import codecs
import re

from workflow.mail.body import COPY_HEADER, READ_ERRORS, _leaves, _message, _text_of  # one reader of MIME
from workflow.mail.message import MimePart

TYPE_CHECKING = False
if TYPE_CHECKING:
    from email.message import MIMEPart as Message
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

INLINE_LIMIT = 64 * 1024  # bytes of an artifact carried whole; above it, its head and a note
HEAD_LINES = 200  # lines of the head of a larger artifact (and at most INLINE_LIMIT bytes of them)
DIFF_LIMIT = 256 * 1024  # bytes of a diff carried; a longer one is cut, with a note
ARTIFACT = "artifact"  # the marks
DIFF = "diff"
VERSION_HEADER = "X-Artifact-Version"  # "<git blob id> <path>": the version a message carried
VERSION_RE = re.compile(r"^\s*([0-9a-f]{40}|[0-9a-f]{64})\s+(\S+)\s*$")


class Copy(NamedTuple):
    """A copy part as a reader finds it."""

    mark: str  # ARTIFACT or DIFF
    name: str  # its file name
    text: str
    attachment: bool  # the diff's attachment (the same text as its inline part)


def is_text(data: bytes, whole: bool = True) -> bool:
    """Whether an artifact's bytes are text to show: UTF-8 without NUL bytes (a head cut inside
    a character, ``whole`` False, still is)."""
    if b"\0" in data:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=whole)
    except UnicodeDecodeError:
        return False
    return True


def file_name(path: str, suffix: str = "") -> str:
    """A part's file name for an artifact path: its last component, plain ASCII."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", path.rsplit("/", 1)[-1])[:100].lstrip(".") or "artifact"
    return base + suffix


def artifact_part(path: str, data: bytes, total: int) -> MimePart:
    """The artifact's copy: whole when it is text within ``INLINE_LIMIT``, else its head and a note
    (a note alone when it is not text). ``data`` is what was read of it, ``total`` its size."""
    where = f"[workflow] A copy of {path} for people; agents read it from the repository."
    if not is_text(data[:INLINE_LIMIT], whole=len(data) == total and total <= INLINE_LIMIT):
        note = f"{where}\n[not shown: {path} is not text ({total} bytes); read it in the repository]\n"
        return MimePart(note, filename=file_name(path, ".txt"), mark=ARTIFACT)
    if total <= INLINE_LIMIT and len(data) == total:
        return MimePart(data.decode("utf-8"), filename=file_name(path), mark=ARTIFACT)
    head = data[:INLINE_LIMIT].decode("utf-8", "ignore")
    lines = head.splitlines(keepends=True)[:HEAD_LINES]
    shown = "".join(lines)
    note = (
        f"\n[workflow] … only the first {len(lines)} lines ({len(shown.encode())} of {total} bytes) are shown: "
        f"{path} is larger than the {INLINE_LIMIT // 1024} KiB a message carries; read the rest in the repository.\n"
    )
    return MimePart(shown.rstrip("\n") + "\n" + note, filename=file_name(path), mark=ARTIFACT)


def diff_parts(path: str, diff: str) -> list[MimePart]:
    """The diff against the last reviewed version: inline, and as a ``text/x-diff`` attachment."""
    if len(diff.encode()) > DIFF_LIMIT:
        cut = diff.encode()[:DIFF_LIMIT].decode("utf-8", "ignore")
        diff = cut[: cut.rfind("\n") + 1] + f"[workflow] … the diff is cut at {DIFF_LIMIT // 1024} KiB\n"
    name = file_name(path, ".diff")
    return [
        MimePart(diff, "text/plain", name, inline=True, mark=DIFF),
        MimePart(diff, "text/x-diff", name, inline=False, mark=DIFF),
    ]


def version_value(blob: str, path: str) -> str:
    return f"{blob} {path}"


def read_version(value: str) -> tuple[str, str] | None:
    """(blob id, path) of a ``VERSION_HEADER`` value, None when it is not one."""
    m = VERSION_RE.match(value)
    return (m.group(1), m.group(2)) if m else None


def copies(raw: bytes) -> list[Copy]:
    """The copy parts of a stored message, in order (none when it has none or cannot be read)."""
    if b"X-Workflow-Copy" not in raw and b"x-workflow-copy" not in raw.lower():
        return []
    msg = _message(raw)
    if isinstance(msg, str):
        return []
    out: list[Copy] = []
    try:
        for part, _ in _leaves(msg):
            mark = str(part.get(COPY_HEADER) or "").strip().lower()
            if mark in (ARTIFACT, DIFF):
                out.append(Copy(mark, _name(part), _text_of(part), part.is_attachment()))
    except READ_ERRORS:
        return []
    return out


def _name(part: Message) -> str:
    return " ".join(str(part.get_filename() or "").split())[:200]
