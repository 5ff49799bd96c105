"""Index: a SQLite (WAL) cache of every stored copy, for filters, threads and full-text search.

The Maildirs are the truth. ``refresh`` notices changes made behind our back (a mail client
marking a message read, a file removed) by comparing each mailbox's new/ and cur/ mtimes with
the ones recorded at its last scan, and rescans only those. ``rebuild`` recreates everything from
the Maildirs alone; a deleted index is rebuilt on first open. The FTS5 table is contentless:
rows for copies that disappear stay until the next rebuild but never match, because every search
joins back to ``msg`` (whose ids are never reused). The server writes a copy's full-text row later
(``add_many(text=False)`` notes its id in ``fts_todo``): tokenizing a body is the largest part of
indexing a copy, and no check reads it. ``fill_text`` writes the rows noted, oldest first; the
server calls it when it is quiet, and ``search`` before it searches, so a search always sees
every copy indexed.

Message-IDs, addresses and mailbox names are interned in ``str`` and stored as integers (a
References chain of twelve ids is a dozen small numbers, not 700 bytes): at 100k messages the
index stays under a tenth of notmuch's on the same mail. ``Row`` always carries the strings.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from workflow.core.db import open_db
from workflow.core.diskfull import unreadable
from workflow.core.errors import MailIndexError
from workflow.mail.copies import describe, describe_row, encode, read_copy, strings, text_of
from workflow.mail.maildir import Entry, Maildirs, read_at
from workflow.mail.message import Parsed, parse
from workflow.mail.reader import REBUILD, SCHEMA_VERSION, Reader, mtimes
from workflow.mail.rows import COLUMNS, N_COLUMNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from workflow.mail.rows import DbRow, Row

SCHEMA = """
CREATE TABLE IF NOT EXISTS str(n INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS msg(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  box INTEGER NOT NULL, key TEXT NOT NULL, subdir TEXT NOT NULL, flags TEXT NOT NULL,
  seen INTEGER NOT NULL, mid INTEGER, irt INTEGER, refs TEXT NOT NULL,
  sender INTEGER NOT NULL, rcpt TEXT NOT NULL, subject TEXT NOT NULL, date INTEGER NOT NULL,
  event TEXT, state TEXT, artifacts TEXT NOT NULL, space TEXT, size INTEGER NOT NULL, root INTEGER,
  UNIQUE(box, key));
CREATE INDEX IF NOT EXISTS msg_box ON msg(box, seen, date);
CREATE INDEX IF NOT EXISTS msg_mid ON msg(mid);
CREATE INDEX IF NOT EXISTS msg_root ON msg(root);
CREATE INDEX IF NOT EXISTS msg_space ON msg(space) WHERE space IS NOT NULL;
CREATE TABLE IF NOT EXISTS dirstate(mailbox TEXT PRIMARY KEY, new_mtime INTEGER NOT NULL, cur_mtime INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(subject, body, people, content='', tokenize='unicode61 remove_diacritics 2', detail=none);
CREATE TABLE IF NOT EXISTS fts_todo(id INTEGER PRIMARY KEY);
"""
TEXT_BATCH = 100  # full-text rows written per transaction by ``fill_text``
UPGRADES = {  # from schema N to N + 1
    2: "CREATE TABLE IF NOT EXISTS fts_todo(id INTEGER PRIMARY KEY);",
    # 4: the full text gains the people (display names) and HTML-only bodies as text: every
    # copy's row is written again, by fill_text, from the Maildirs.
    3: "DROP TABLE IF EXISTS fts; "
    "CREATE VIRTUAL TABLE fts USING fts5(subject, body, people, content='', "
    "tokenize='unicode61 remove_diacritics 2', detail=none); "
    "DELETE FROM fts_todo; INSERT INTO fts_todo(id) SELECT id FROM msg;",
}


class Index(Reader):
    """An open index, for reading and writing; use as a context manager, keep it short-lived."""

    def __init__(self, path: Path, maildirs: Maildirs, domain: str, *, rebuild_if_new: bool = True) -> None:
        self.maildirs = maildirs
        self.domain = domain
        fresh = not path.exists()
        super().__init__(open_db(path, what="index", error=MailIndexError, remedy=REBUILD), path)
        self.path: Path = path
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            while version in UPGRADES:
                self.db.executescript(
                    f"BEGIN IMMEDIATE; {UPGRADES[version]} PRAGMA user_version={version + 1}; COMMIT;"
                )
                version += 1
            if version not in (0, SCHEMA_VERSION):
                raise MailIndexError(
                    f"index {path} has schema {version}, expected {SCHEMA_VERSION}; run `workflow reindex`"
                )
            if version == 0:
                self.db.executescript(SCHEMA)
                self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise unreadable(MailIndexError, "index", path, e, REBUILD) from None
        if fresh and rebuild_if_new:
            self.rebuild()

    def __enter__(self) -> Index:
        return self

    # ---------------------------------------------------------------- interning

    def _intern(self, values: Iterable[str]) -> dict[str, int]:
        """Ids for these strings, creating the missing ones (inside the caller's transaction)."""
        cache = self._ids
        missing = [v for v in set(values) if v not in cache]
        if missing:
            self.db.executemany("INSERT OR IGNORE INTO str(v) VALUES (?)", [(v,) for v in missing])
            self._load_ids(missing)
        return cache

    # ---------------------------------------------------------------- writing

    def add_many(self, items: Sequence[tuple[Sequence[Entry], bytes, Parsed]], *, text: bool = True) -> None:
        """Record several deliveries in one transaction (the server batches concurrent ones);
        ``text=False`` leaves their full-text rows to ``fill_text``."""
        rows: list[DbRow] = []
        fts: list[tuple[str, str, str]] = []
        for entries, raw, parsed in items:
            if not entries:
                continue
            row = describe_row(entries[0], raw, parsed, self.domain)
            words = text_of(raw, parsed) if text else None
            for e in entries:
                rows.append((e.mailbox, e.key, e.subdir, e.flags, int("S" in e.flags)) + row[5:])
                if words is not None:
                    fts.append(words)
        if rows:
            self._insert(rows, fts if text else None)

    def _insert(self, rows: Sequence[DbRow], fts: Sequence[tuple[str, str, str]] | None) -> None:
        """Insert msg rows with their full-text rows, or (``fts`` None) with a note to write
        those later. IGNORE, never REPLACE: a row already there came from a rescan that saw the
        file more recently (a reader may have marked it seen since the server's batch was made)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            ids = self._intern(v for row in rows for v in strings(row))
            insert = f"INSERT OR IGNORE INTO msg({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})"
            if fts is None:
                # Rows only, in one call; the new rows are those numbered after the largest id
                # before them (AUTOINCREMENT, and this transaction writes alone).
                (last,) = self.db.execute("SELECT coalesce(max(id), 0) FROM msg").fetchone()
                self.db.executemany(insert, [encode(row, ids) for row in rows])
                self.db.execute("INSERT INTO fts_todo(id) SELECT id FROM msg WHERE id > ?", (last,))
            else:
                for row, words in zip(rows, fts, strict=True):
                    cur = self.db.execute(insert, encode(row, ids))
                    if cur.rowcount == 1:
                        self.db.execute(
                            "INSERT INTO fts(rowid, subject, body, people) VALUES (?,?,?,?)", (cur.lastrowid, *words)
                        )
            self.db.execute("COMMIT")
        except (sqlite3.DatabaseError, ValueError) as e:  # ValueError: a string SQLite cannot take; never left open
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self._ids.clear()  # ids interned in the rolled-back transaction no longer exist
            self._names.clear()
            raise MailIndexError(f"index {self.path} could not be updated ({e}); run `workflow reindex`") from None

    def text_due(self) -> int:
        """How many copies still lack their full-text row."""
        return int(self._exec("SELECT count(*) FROM fts_todo").fetchone()[0])

    def fill_text(self, most: int | None = None) -> int:
        """Write the full-text rows left for later, oldest first, ``TEXT_BATCH`` per transaction
        (``most`` at most); returns how many notes were settled. A copy no longer indexed, or whose
        file is gone, is settled without one (a later rescan indexes a copy found again, text and
        all)."""
        done = 0
        while most is None or done < most:
            n = TEXT_BATCH if most is None else min(TEXT_BATCH, most - done)
            try:
                self.db.execute("BEGIN IMMEDIATE")
                todo = self.db.execute(
                    "SELECT t.id, s.v, m.key, m.subdir, m.flags FROM fts_todo t LEFT JOIN msg m ON m.id = t.id "
                    "LEFT JOIN str s ON s.n = m.box ORDER BY t.id LIMIT ?",
                    (n,),
                ).fetchall()
                texts: list[tuple[int, str, str, str]] = []
                for rowid, box, key, sub, flags in todo:
                    got = self._read(box, key, sub, flags) if box is not None else None
                    if got is not None:
                        texts.append((rowid, *text_of(got[0], got[1])))
                self.db.executemany("INSERT INTO fts(rowid, subject, body, people) VALUES (?,?,?,?)", texts)
                self.db.executemany("DELETE FROM fts_todo WHERE id=?", [(t[0],) for t in todo])
                self.db.execute("COMMIT")
            except (sqlite3.DatabaseError, ValueError) as e:  # ValueError: a string SQLite cannot take
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise MailIndexError(f"index {self.path} could not be updated ({e}); run `workflow reindex`") from None
            done += len(todo)
            if len(todo) < n:
                break
        return done

    def _read(self, mailbox: str, key: str, subdir: str, flags: str) -> tuple[bytes, Parsed] | None:
        """A copy's bytes and headers where its row says it is, else wherever it is now."""
        raw = read_at(self.maildirs.dir(mailbox), mailbox, key, subdir, flags)
        return (raw, parse(raw)) if raw is not None else None

    def search(
        self, text: str, mailboxes: Sequence[str] | None = None, limit: int = 50, senders: Sequence[str] = ()
    ) -> list[Row]:
        self.fill_text()  # every copy indexed is searched, however recent
        return super().search(text, mailboxes, limit, senders)

    def _mtimes(self, mailbox: str) -> tuple[int, int]:
        return mtimes(self.maildirs.dir(mailbox))

    def refresh(self, mailboxes: Iterable[str] | None = None) -> int:
        """Rescan mailboxes whose directories changed since their last scan; returns how many."""
        boxes = self.maildirs.mailboxes() if mailboxes is None else list(mailboxes)
        changed = self.changed((mb, self.maildirs.dir(mb)) for mb in boxes)
        for mb, now in changed:
            self._rescan(mb, now)
        return len(changed)

    def _rescan(self, mailbox: str, mtimes: tuple[int, int]) -> None:
        box = self._lookup([mailbox])
        have = {
            key: (i, sub, flags)
            for i, key, sub, flags in (
                self._exec("SELECT id, key, subdir, flags FROM msg WHERE box=?", (box[0],)) if box else ()
            )
        }
        add_rows: list[DbRow] = []
        add_fts: list[tuple[str, str, str]] = []
        updates: list[DbRow] = []
        seen_keys: set[str] = set()
        for e in self.maildirs.scan(mailbox):
            seen_keys.add(e.key)
            old = have.get(e.key)
            if old is None:
                got = read_copy(e)
                if got is not None:
                    row, fts = describe(e, got[0], got[1], self.domain)
                    add_rows.append(row)
                    add_fts.append(fts)
            elif (old[1], old[2]) != (e.subdir, e.flags):
                updates.append((e.subdir, e.flags, int("S" in e.flags), old[0]))
        gone = [(v[0],) for k, v in have.items() if k not in seen_keys]
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("UPDATE msg SET subdir=?, flags=?, seen=? WHERE id=?", updates)
            self.db.executemany("DELETE FROM msg WHERE id=?", gone)
            self.db.execute(
                "INSERT OR REPLACE INTO dirstate(mailbox, new_mtime, cur_mtime) VALUES (?,?,?)", (mailbox, *mtimes)
            )
            self.db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise MailIndexError(f"index {self.path} could not be updated ({e}); run `workflow reindex`") from None
        if add_rows:
            self._insert(add_rows, add_fts)

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Forget everything and index every mailbox from the Maildirs; returns copies indexed."""
        self._exec("BEGIN IMMEDIATE")
        try:
            for table in ("msg", "dirstate", "str", "fts_todo"):
                self.db.execute(f"DELETE FROM {table}")
            self.db.execute("INSERT INTO fts(fts) VALUES('delete-all')")
            self.db.execute("DELETE FROM sqlite_sequence WHERE name='msg'")
            self._ids.clear()
            self._names.clear()
            ids: dict[str, int] = {}  # we hold the write lock: number new strings ourselves
            total = 0
            boxes = self.maildirs.mailboxes()
            for n, mb in enumerate(boxes, 1):
                mtimes = self._mtimes(mb)
                batch: list[tuple[DbRow, tuple[str, str, str]]] = []
                for e in self.maildirs.scan(mb):
                    got = read_copy(e)
                    if got is not None:
                        batch.append(describe(e, got[0], got[1], self.domain))
                fresh: list[tuple[int, str]] = []
                for row, _ in batch:
                    for v in strings(row):
                        if v not in ids:
                            ids[v] = len(ids) + 1
                            fresh.append((ids[v], v))
                self.db.executemany("INSERT INTO str(n, v) VALUES (?,?)", fresh)
                self.db.executemany(
                    f"INSERT INTO msg({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})",
                    [encode(b[0], ids) for b in batch],
                )
                first = self.db.execute("SELECT coalesce(max(id),0) FROM msg").fetchone()[0] - len(batch) + 1
                self.db.executemany(
                    "INSERT INTO fts(rowid, subject, body, people) VALUES (?,?,?,?)",
                    [(first + i, *words) for i, (_, words) in enumerate(batch)],
                )
                self.db.execute("INSERT INTO dirstate VALUES (?,?,?)", (mb, *mtimes))
                total += len(batch)
                if progress:
                    progress(n, len(boxes))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self._ids.clear()
            self._names.clear()
            raise
        return total

    def drift(self) -> list[tuple[str, int, int, int]]:
        """Mailboxes where the index and the files disagree and ``refresh`` would not notice:
        (mailbox, files not indexed, rows without a file, copies whose place or flags changed).

        A mailbox whose new/ or cur/ changed since its last scan is not drift: a mail client
        that marked a message read (renamed ``new/X`` to ``cur/X:2,S``) changed it, and the next
        ``refresh`` takes the change in. Only a disagreement the directory mtimes hide (or one in
        a mailbox that is gone) is drift; a mailbox that changes while it is compared is skipped."""
        out = []
        names = dict(self._exec("SELECT n, v FROM str WHERE n IN (SELECT DISTINCT box FROM msg)").fetchall())
        rows: dict[str, dict[str, tuple[str, str]]] = {}
        for box, key, sub, flags in self._exec("SELECT box, key, subdir, flags FROM msg"):
            rows.setdefault(names[box], {})[key] = (sub, flags)
        scanned = {mb: (n, c) for mb, n, c in self._exec("SELECT mailbox, new_mtime, cur_mtime FROM dirstate")}
        on_disk = set(self.maildirs.mailboxes())
        for mailbox in sorted(on_disk | set(rows)):
            before = self._mtimes(mailbox)
            if mailbox in on_disk and scanned.get(mailbox) != before:
                continue  # changed since its last scan: refresh sees it
            have = rows.get(mailbox, {})
            disk = {e.key: (e.subdir, e.flags) for e in self.maildirs.scan(mailbox)}
            if mailbox in on_disk and self._mtimes(mailbox) != before:
                continue  # changed while it was read
            unindexed = sum(1 for k in disk if k not in have)
            orphaned = sum(1 for k in have if k not in disk)
            changed = sum(1 for k, v in disk.items() if k in have and have[k] != v)
            if unindexed or orphaned or changed:
                out.append((mailbox, unindexed, orphaned, changed))
        return out


def reset(path: Path, maildirs: Maildirs, domain: str, progress: Callable[[int, int], None] | None = None) -> int:
    """Delete the index (and its WAL files) and rebuild it from the Maildirs; returns copies
    indexed. Also the repair for a corrupt index file, which cannot even be opened to empty it."""
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with Index(path, maildirs, domain, rebuild_if_new=False) as index:
        index.rebuild(progress)
        return index.count()
