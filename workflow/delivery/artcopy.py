"""Artifact copy: what a notification carries of its artifact for people, and the check that it exists.

``carry`` gives a review-request, an approval or a rejection the artifact's text and, when it
was reviewed before, the diff against the last reviewed version (``mail.artparts`` builds the
parts). The artifact is read by ``core.safeopen`` (no symlink followed) where it is now. Each
message records the version it carried as ``X-Artifact-Version: <git blob id> <path>``, and the
version itself is kept in the owner's state directory (``reviewed/<blob id>``: no run's agent
can write there, and no git runs for it), so it can be read back even if it was never committed.
"The last reviewed version" is the one the latest earlier review-request of the same artifact
(same root and name, any state folder) recorded, found through the index and read from that
store; when there is none, or it is not kept (a person's own process could not write it), no
diff is carried.

``refuse_missing`` is ``workflow-notify``'s refusal of an artifact that is not in the tree
(docs/message-format.md states the rule and its exceptions).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from typing import NamedTuple

from workflow.core import events, files, safeopen
from workflow.core.config import Config
from workflow.core.errors import ArtifactError, MessageError
from workflow.core.locate import did_you_mean, locate, scan, split_ref
from workflow.mail.artparts import VERSION_HEADER, artifact_part, diff_parts, read_version, version_value
from workflow.mail.message import MimePart, parse

MOST = 4  # artifacts of one message copied
LOOK_BACK = 50  # earlier review-requests of the artifact looked at for the version they carried


class Carried(NamedTuple):
    parts: tuple[MimePart, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()


def carry(event: str, artifacts: Sequence[str], config: Config, must_exist: bool = False) -> Carried:
    """The parts and headers a message of ``event`` about ``artifacts`` carries (none for the
    events that do not carry the artifact, or for an artifact that is not found once);
    ``must_exist`` first refuses an artifact that is not there (``refuse_missing``)."""
    if must_exist:
        refuse_missing(event, artifacts, config)
    if "copy" not in events.get(event).rules:
        return Carried()
    parts: list[MimePart] = []
    headers: list[tuple[str, str]] = []
    for ref in artifacts[:MOST]:
        found = locate(ref, config)
        if len(found) != 1:
            continue
        path = found[0].path
        try:
            data, total = safeopen.read_sized(config, path)
        except ArtifactError:
            continue
        blob = store(config, data)
        parts.append(artifact_part(path, data, total))
        before = last_reviewed(config, path)
        if before is not None and before != blob:
            old = blob_text(config, before)
            if old is not None and total == len(data):
                diff = unified(old, data.decode("utf-8", "replace"), path, before)
                if diff:
                    parts.extend(diff_parts(path, diff))
        headers.append((VERSION_HEADER, version_value(blob, path)))
    return Carried(tuple(parts), tuple(headers))


def unified(old: str, new: str, path: str, before: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        f"a/{path} (last reviewed, blob {before[:12]})",
        f"b/{path} (now)",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def store(config: Config, data: bytes) -> str:
    """The artifact's git blob id; this version kept in the owner's state directory (``reviewed/``,
    by that id), where no run's agent can write, so a later diff is made against what was mailed."""
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    kept = config.state.reviewed / blob
    try:
        if not kept.exists():
            kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            files.write_atomic(kept, data, mode=0o600, durable=False)
    except OSError:  # not the owner's process (a person's direct delivery): no diff next time
        pass
    return blob


def blob_text(config: Config, blob: str) -> str | None:
    """The text of a version ``store`` kept, if it is there and still hashes to its id."""
    if not re.fullmatch(r"[0-9a-f]{40}", blob):
        return None
    try:
        data = (config.state.reviewed / blob).read_bytes()
    except OSError:
        return None
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
        return None
    return data.decode("utf-8", "replace")


def last_reviewed(config: Config, path: str) -> str | None:
    """The blob id the latest earlier review-request of this artifact recorded, if any."""
    from workflow.mail.maildir import Maildirs, read_at  # lazy: only a copied artifact looks back
    from workflow.mail.reader import Reader

    me = split_ref(path, config)
    if me is None:
        return None
    reader = Reader.open(str(config.index_path))
    if reader is None:
        return None
    with reader:
        rows = reader.query(event="review-request", artifact_like=me.name)
    maildirs = Maildirs(config.mail_root)
    seen: set[str] = set()
    for row in reversed(rows[-LOOK_BACK:]):
        if row.message_id in seen:
            continue
        seen.add(row.message_id or "")
        raw = read_at(maildirs.dir(row.mailbox), row.mailbox, row.key, row.subdir, row.flags)
        if raw is None:
            continue
        for value in parse(raw).get_all(VERSION_HEADER):
            got = read_version(value)
            other = split_ref(got[1], config) if got else None
            if got and other is not None and (other.root, other.name) == (me.root, me.name):
                return got[0]
    return None


def refuse_missing(event: str, artifacts: Sequence[str], config: Config) -> None:
    """Refuse, with "did you mean", an artifact that names nothing in the tree, for the events that
    present an artifact (the ``exists`` rule of ``core.events``); a question (or any other event) may name one not yet written."""
    if "exists" not in events.get(event).rules:
        return
    for ref in artifacts:
        if split_ref(ref, config) is None or locate(ref, config):
            continue  # not under an artifact root: validate_artifact's and the roster's concern
        hint = did_you_mean(ref, scan(config))
        raise MessageError(
            f"artifact {ref} does not exist in the repository{hint} "
            f"(a message of type {event} is about an artifact that is there; to ask for one to be written, send a question)"
        )
