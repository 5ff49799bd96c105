"""Rows: what the index stores of one copy — the row model, its columns, and how a copy becomes a row.

``describe`` turns a stored copy (its Maildir entry, bytes and parsed headers) into a row and
its full-text fields; ``encode``/``decode`` swap the row's strings (Message-IDs, addresses,
mailbox names) for interned numbers and back; ``Row`` is what every reader gets.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from workflow.core.addresses import parse_internal
from workflow.mail.maildir import Entry
from workflow.mail.message import Parsed, body_text, parse

DbRow = tuple[Any, ...]  # a msg row as SQLite returns it, or as describe() builds it
COLUMNS = (
    "box, key, subdir, flags, seen, mid, irt, refs, sender, rcpt, "
    "subject, date, event, state, artifacts, space, size, root"
)
N_COLUMNS = 18


class Row(NamedTuple):
    """One stored copy as the index knows it."""

    id: int
    mailbox: str
    key: str
    subdir: str
    flags: str
    seen: bool
    message_id: str | None
    in_reply_to: str | None
    refs: tuple[str, ...]
    sender: str
    recipients: tuple[str, ...]
    subject: str
    date: int
    event: str | None
    state: str | None
    artifacts: tuple[str, ...]
    space: str | None
    size: int
    root: str | None

    @property
    def ancestry(self) -> list[str]:
        out = list(self.refs)
        if self.in_reply_to and self.in_reply_to not in out:
            out.append(self.in_reply_to)
        return out

    def to_dict(self) -> dict[str, object]:
        """The row as the CLI's ``--json`` shows it."""
        return {
            "message_id": self.message_id,
            "mailbox": self.mailbox,
            "from": self.sender,
            "to": list(self.recipients),
            "subject": self.subject,
            "date": self.date,
            "event": self.event,
            "state": self.state,
            "artifacts": list(self.artifacts),
            "in_reply_to": self.in_reply_to,
            "seen": self.seen,
        }


def internal_space(recipients: Iterable[str], domain: str) -> str | None:
    """The panel-internal space a message belongs to, from the addresses it names."""
    for addr in recipients:
        local, _, dom = addr.rpartition("@")
        if dom == domain and parse_internal(local):
            return local
    return None


def message_date(value: str | None) -> int:
    if not value:
        return 0
    from email.utils import mktime_tz, parsedate_tz  # lazy: start-up time (the email package)

    try:
        t = parsedate_tz(value)
        return int(mktime_tz(t)) if t else 0
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0


def describe(entry: Entry, raw: bytes, parsed: Parsed, domain: str) -> tuple[DbRow, tuple[str, str]]:
    """The msg row and the FTS (subject, body) for one stored copy."""
    rcpt = parsed.recipients
    refs = parsed.references
    # The thread's root as far as this message knows it: the first Reference, else the parent.
    root = refs[0] if refs else (parsed.in_reply_to or parsed.message_id)
    row = (
        entry.mailbox,
        entry.key,
        entry.subdir,
        entry.flags,
        int("S" in entry.flags),
        parsed.message_id,
        parsed.in_reply_to,
        refs,
        parsed.sender,
        rcpt,
        parsed.subject,
        message_date(parsed.get("Date")),
        parsed.event,
        parsed.state,
        ",".join(parsed.artifacts),
        internal_space(rcpt, domain),
        len(raw),
        root,
    )
    return row, (parsed.subject, body_text(raw, parsed))


def encode(row: DbRow, ids: Mapping[str, int]) -> DbRow:
    """A described row with its strings replaced by their interned numbers."""
    (mb, key, sub, flags, seen, mid, irt, refs, sender, rcpt, subj, date, ev, st, arts, space, size, root) = row
    return (
        ids[mb],
        key,
        sub,
        flags,
        seen,
        ids[mid] if mid else None,
        ids[irt] if irt else None,
        " ".join(str(ids[r]) for r in refs),
        ids[sender],
        " ".join(str(ids[a]) for a in rcpt),
        subj,
        date,
        ev,
        st,
        arts,
        space,
        size,
        ids[root] if root else None,
    )


def strings(row: DbRow) -> list[str]:
    """The strings of a described row that the index interns."""
    out = [row[0], row[8], *row[7], *row[9]]
    out.extend(v for v in (row[5], row[6], row[17]) if v)
    return out


def numbers(raw: Iterable[DbRow]) -> set[int]:
    """Every interned number the stored rows use (to look their strings up at once)."""
    ns: set[int] = set()
    for t in raw:
        (_, box, _, _, _, _, mid, irt, refs, sender, rcpt, *_rest, root) = t
        ns.update(n for n in (box, mid, irt, sender, root) if n is not None)
        ns.update(int(x) for x in str(refs).split())
        ns.update(int(x) for x in str(rcpt).split())
    return ns


def decode(raw: Iterable[DbRow], names: Mapping[int, str]) -> list[Row]:
    """Stored rows (``id`` + COLUMNS, strings as numbers) as Rows carrying the strings."""
    out = []
    for t in raw:
        (
            i,
            box,
            key,
            sub,
            flags,
            seen,
            mid,
            irt,
            refs,
            sender,
            rcpt,
            subj,
            date,
            ev,
            st,
            arts,
            space,
            size,
            root,
        ) = t
        out.append(
            Row(
                int(i),
                names[box],
                str(key),
                str(sub),
                str(flags),
                bool(seen),
                names[mid] if mid is not None else None,
                names[irt] if irt is not None else None,
                tuple(names[int(x)] for x in str(refs).split()),
                names[sender],
                tuple(names[int(x)] for x in str(rcpt).split()),
                str(subj),
                int(date),
                ev if isinstance(ev, str) else None,
                st if isinstance(st, str) else None,
                tuple(a for a in str(arts).split(",") if a),
                space if isinstance(space, str) else None,
                int(size),
                names[root] if root is not None else None,
            )
        )
    return out


def read_copy(e: Entry) -> tuple[bytes, Parsed] | None:
    try:
        fd = os.open(e.file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # moved or removed while we scanned; the next refresh sees where it went
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    return raw, parse(raw)
