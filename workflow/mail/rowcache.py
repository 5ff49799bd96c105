"""Row cache: the rows that name an artifact (``Reader.with_artifacts``), kept by a long-lived
reader — ``workflow web``'s board — and brought up to date from what changed, not read whole again.

Reading and decoding 100,000 rows takes a second; a page has a fifth of that. Whether anything
changed is ``PRAGMA data_version`` on a connection kept open for that alone (and the index file's
inode: ``workflow reindex`` may replace the file). On a change, a narrow read of every such copy's
(id, mailbox, key, subdir, flags) says which rows are new or changed — read in full and decoded —
and which are gone; the list keeps the order ``with_artifacts`` gives (date, key, mailbox number).
A fresh reader does each read, so strings renumbered by a rebuild are never decoded from a stale map.
"""

from __future__ import annotations

import bisect
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from workflow.mail.reader import Reader
from workflow.mail.rows import Row


class ArtifactRows:
    """``with_artifacts()`` of the index at ``path``, read through ``open_reader`` only when changed."""

    def __init__(self, path: Path, open_reader: Callable[[], Reader]) -> None:
        self.path = path
        self.open_reader = open_reader
        self.version = 0  # grows each time the rows change: a key for what is made from them
        self._lock = threading.Lock()
        self._watch: sqlite3.Connection | None = None
        self._seen: tuple[int, int] | None = None  # (inode, data_version) last read at
        self._marks: dict[int, tuple[int, str, str, str]] = {}
        self._by_id: dict[int, Row] = {}
        self._rows: list[Row] = []

    def rows(self) -> list[Row]:
        """Every stored copy that names an artifact, oldest first, as the index has them now."""
        with self._lock:
            now = self._stamp()
            if now != self._seen:
                self._update()
                self._seen = now
            return self._rows

    def close(self) -> None:
        with self._lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None

    def _stamp(self) -> tuple[int, int]:
        try:
            inode = os.stat(self.path).st_ino
        except OSError:
            return (0, 0)
        if self._seen is None or self._seen[0] != inode or self._watch is None:
            if self._watch is not None:
                self._watch.close()
            self._watch = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        return (inode, int(self._watch.execute("PRAGMA data_version").fetchone()[0]))

    def _update(self) -> None:
        with self.open_reader() as reader:
            marks = reader.artifact_marks()
            stale = [i for i, m in marks.items() if self._marks.get(i) != m]
            fresh = reader.rows_by_id(stale) if stale else []
        if not fresh and len(marks) == len(self._marks):
            return  # nothing that names an artifact changed

        def order(r: Row) -> tuple[int, str, int]:
            return (r.date, r.key, marks[r.id][0])

        if all(i not in self._by_id for i in stale) and len(marks) == len(self._marks) + len(stale):
            rows = list(self._rows)  # only new copies (the usual change): put each in its place
            for r in fresh:
                bisect.insort(rows, r, key=order)
            self._by_id.update((r.id, r) for r in fresh)
        else:
            self._by_id = {i: r for i, r in self._by_id.items() if i in marks}
            self._by_id.update((r.id, r) for r in fresh)
            rows = sorted(self._by_id.values(), key=order)
        self._marks, self._rows = marks, rows
        self.version += 1
