"""Scan: each role's unread mail, read straight from its Maildirs for agentd's sweeps.

No index on the wake path: a sweep never waits for the server's or a run's SQLite lock. Each
file's headers are parsed once and cached by (mailbox, key) until the copy is marked read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from workflow.mail.maildir import Maildirs
from workflow.mail.message import parse


class Meta(NamedTuple):
    """What the sweep needs of one unread copy."""

    mid: str
    event: str | None
    root: str
    artifacts: tuple[str, ...]
    sender: str = ""  # its From address


class MailScan:
    """Unread mail of some mailboxes, with a header cache that follows the Maildirs."""

    def __init__(self, maildirs: Maildirs) -> None:
        self.maildirs = maildirs
        self.cache: dict[tuple[str, str], Meta] = {}

    def unread(self, boxes: Sequence[str]) -> list[Meta]:
        out: list[Meta] = []
        for box in boxes:
            live: set[tuple[str, str]] = set()
            for e in self.maildirs.scan(box):
                if "S" in e.flags or "T" in e.flags:
                    continue
                k = (box, e.key)
                live.add(k)
                m = self.cache.get(k)
                if m is None:
                    try:
                        with open(e.file, "rb") as f:
                            head = f.read(1 << 16)
                    except FileNotFoundError:
                        continue  # marked or moved meanwhile
                    p = parse(head)
                    mid = p.message_id or f"{box}/{e.key}"
                    refs = p.references
                    m = self.cache[k] = Meta(
                        mid,
                        p.event,
                        refs[0] if refs else (p.in_reply_to or mid),
                        tuple(p.artifacts),
                        (p.sender or "").lower(),
                    )
                out.append(m)
            for k in [k for k in self.cache if k[0] == box and k not in live]:
                del self.cache[k]
        return out
