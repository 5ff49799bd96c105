"""Copies: how a stored copy becomes an index row — the writing side of ``mail.rows``.

``describe`` turns a stored copy (its Maildir entry, bytes and parsed headers) into a row and its
full-text fields; ``encode`` swaps the row's strings for interned numbers; ``strings`` lists the
strings to intern; ``read_copy`` reads a copy's bytes and headers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from workflow.core.addresses import parse_internal
from workflow.mail.body import body_text
from workflow.mail.maildir import Entry
from workflow.mail.message import Parsed, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from workflow.mail.rows import DbRow


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


def describe(entry: Entry, raw: bytes, parsed: Parsed, domain: str) -> tuple[DbRow, tuple[str, str, str]]:
    """The msg row and the FTS (subject, body, people) for one stored copy."""
    return describe_row(entry, raw, parsed, domain), text_of(raw, parsed)


def text_of(raw: bytes, parsed: Parsed) -> tuple[str, str, str]:
    """What the full-text index holds of a copy: its subject, its readable body (an HTML-only
    one as text, ``mail.body``) and its people — the display names and addresses of From, To
    and Cc (``"Bob Example" <spec-reviewer@…>`` is found by "Bob")."""
    return parsed.subject, body_text(raw, parsed), people(parsed)


def people(parsed: Parsed) -> str:
    """The names and addresses of a copy's From, To and Cc, one per line."""
    from email.utils import getaddresses  # lazy: start-up time (the email package)

    values = [v for name in ("From", "To", "Cc") for v in parsed.get_all(name)]
    try:
        pairs = getaddresses(values)
    except (ValueError, TypeError, IndexError):  # whatever a header holds, the copy is still indexed
        return "\n".join(values)
    return "\n".join(f"{n} {a}".strip() for n, a in pairs if n or a)


def describe_row(entry: Entry, raw: bytes, parsed: Parsed, domain: str) -> DbRow:
    """The msg row for one stored copy."""
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
    return row


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
