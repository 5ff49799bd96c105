"""Row cache: the rows that name an artifact (``Reader.with_artifacts``), kept by a long-lived
reader — ``workflow web``'s board — and brought up to date from what changed, not read whole again.

Reading and decoding 100,000 rows takes a second; a page has a fifth of that. Whether anything
changed is ``PRAGMA data_version`` on a connection kept open for that alone (and the index file's
inode: ``workflow reindex`` may replace the file). The usual change is new copies only: the rows
with an id above the highest seen are read, and a count of the others (with the id sequence, which
a rebuild starts again) confirms that none went. Anything else — a copy deleted, a rebuild — reads
a narrow (id, mailbox, key, subdir, flags) of every such copy to say which rows are new or changed
(read in full and decoded) and which are gone. A copy renamed or flagged in place is taken in at
that next full read only: the rows' ``subdir``, ``flags`` and ``seen`` may lag (the board shows
none of them). The list keeps the order ``with_artifacts`` gives (date, key, mailbox number);
``added_since`` tells a reader of the list which rows came since a version, when only rows came.
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

LOG = 64  # versions whose added rows are kept for ``added_since``


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
        self._last = 0  # the highest id read
        self._seq = 0  # the index's id sequence then
        self._log: list[tuple[int, list[Row]]] = []  # (version, the rows that came with it)
        self._base = 0  # ``_log`` holds every change after this version

    def rows(self) -> list[Row]:
        """Every stored copy that names an artifact, oldest first, as the index has them now."""
        with self._lock:
            now = self._stamp()
            if now != self._seen:
                if self._seen is None or self._seen[0] != now[0] or not self._append():
                    self._update()
                self._seen = now
            return self._rows

    def order(self, r: Row) -> tuple[int, str, int]:
        """Where a row of ``rows()`` sits in it: (date, key, mailbox number)."""
        return (r.date, r.key, self._marks[r.id][0])

    def added_since(self, version: int) -> list[Row] | None:
        """The rows that came after ``version`` of the list, when rows only came since (None when
        one went or changed, or ``version`` is too old to tell)."""
        with self._lock:
            if version < self._base or version > self.version:
                return None
            return [r for v, fresh in self._log if v > version for r in fresh]

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

    def _append(self) -> bool:
        """Take in the copies added since the last read; False when that is not all that changed."""
        with self.open_reader() as reader:
            reader.db.execute("BEGIN")  # one snapshot for the rows and the count
            try:
                fresh = reader.artifact_rows_after(self._last)
                kept, seq = reader.artifact_count(self._last)
            finally:
                reader.db.execute("COMMIT")
        if kept != len(self._by_id) or seq < self._seq:
            return False  # a copy went, or the index was built again
        self._seq = seq
        if fresh:
            self._marks.update((r.id, (box, r.key, r.subdir, r.flags)) for box, r in fresh)
            self._add([r for _, r in fresh])
        return True

    def _add(self, fresh: list[Row]) -> None:
        rows = list(self._rows)  # a new list: a caller may still hold the old one
        for r in sorted(fresh, key=self.order):
            bisect.insort(rows, r, key=self.order)
        self._by_id.update((r.id, r) for r in fresh)
        self._last = max(self._last, *(r.id for r in fresh))
        self._rows = rows
        self.version += 1
        self._log.append((self.version, fresh))
        if len(self._log) > LOG:
            self._base = self._log.pop(0)[0]

    def _update(self) -> None:
        with self.open_reader() as reader:
            reader.db.execute("BEGIN")
            try:
                marks = reader.artifact_marks()
                stale = [i for i, m in marks.items() if self._marks.get(i) != m]
                fresh = reader.rows_by_id(stale) if stale else []
                seq = reader.artifact_count(0)[1]
            finally:
                reader.db.execute("COMMIT")
        self._seq = seq
        if not fresh and len(marks) == len(self._marks):
            return  # nothing that names an artifact changed
        if all(i not in self._by_id for i in stale) and len(marks) == len(self._marks) + len(stale):
            self._marks = marks
            self._add(fresh)  # only new copies: each in its place
            return
        self._by_id = {i: r for i, r in self._by_id.items() if i in marks}
        self._by_id.update((r.id, r) for r in fresh)
        self._marks = marks
        self._rows = sorted(self._by_id.values(), key=self.order)
        self._last = max(self._by_id, default=0)
        self.version += 1
        self._log, self._base = [], self.version
