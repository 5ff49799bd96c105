"""Rows: what the index stores of one copy, as every reader gets it — the row model and its columns.

``Row`` carries the strings; the index stores Message-IDs, addresses and mailbox names as interned
numbers, and ``decode`` swaps them back. How a copy becomes a row is ``mail.copies`` (the writing
side). Start-up time: this module is on the short commands' path, so it imports nothing heavy.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, NamedTuple

    DbRow = tuple[Any, ...]  # a msg row as SQLite returns it, or as copies.describe() builds it
else:
    from workflow.core.records import NamedTuple

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
