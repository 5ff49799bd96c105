"""Index: a SQLite (WAL) cache of every stored copy, for filters, threads and full-text search.

The Maildirs are the truth. ``refresh`` notices changes made behind our back (a mail client
marking a message read, a file removed) by comparing each mailbox's new/ and cur/ mtimes with
the ones recorded at its last scan, and rescans only those. ``rebuild`` recreates everything from
the Maildirs alone; a deleted index is rebuilt on first open. The FTS5 table is contentless:
rows for copies that disappear stay until the next rebuild but never match, because every search
joins back to ``msg`` (whose ids are never reused).

Message-IDs, addresses and mailbox names are interned in ``str`` and stored as integers (a
References chain of twelve ids is a dozen small numbers, not 700 bytes): at 100k messages the
index stays under a tenth of notmuch's on the same mail. ``Row`` always carries the strings.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from workflow.core.db import open_db
from workflow.core.errors import MailIndexError
from workflow.mail.maildir import Entry, Maildirs
from workflow.mail.message import Parsed
from workflow.mail.rows import (
    COLUMNS,
    N_COLUMNS,
    DbRow,
    Row,
    decode,
    describe,
    encode,
    numbers,
    read_copy,
    strings,
)

SCHEMA_VERSION = 2
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
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(subject, body, content='', tokenize='unicode61 remove_diacritics 2', detail=none);
"""
REBUILD = "run `workflow reindex` to rebuild it from the Maildirs"


def _fts_query(text: str) -> str:
    words = re.findall(r"\w+", text, re.UNICODE)
    if not words:
        raise MailIndexError(f"search text {text!r} has no words to look for")
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


class Index:
    """An open index; use as a context manager, keep it short-lived."""

    def __init__(self, path: Path, maildirs: Maildirs, domain: str, *, rebuild_if_new: bool = True) -> None:
        self.path = path
        self.maildirs = maildirs
        self.domain = domain
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        fresh = not path.exists()
        self.db = open_db(path, what="index", error=MailIndexError, remedy=REBUILD)
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise MailIndexError(
                    f"index {path} has schema {version}, expected {SCHEMA_VERSION}; run `workflow reindex`"
                )
            if version == 0:
                self.db.executescript(SCHEMA)
                self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise MailIndexError(f"index {path} is unreadable ({e}); {REBUILD}") from None
        if fresh and rebuild_if_new:
            self.rebuild()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def _exec(self, sql: str, args: Sequence[object] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, args)
        except sqlite3.DatabaseError as e:
            raise MailIndexError(
                f"index {self.path} is unreadable ({e}); run `workflow reindex` to rebuild it"
            ) from None

    # ---------------------------------------------------------------- interning

    def _intern(self, values: Iterable[str]) -> dict[str, int]:
        """Ids for these strings, creating the missing ones (inside the caller's transaction)."""
        cache = self._ids
        missing = [v for v in set(values) if v not in cache]
        if missing:
            self.db.executemany("INSERT OR IGNORE INTO str(v) VALUES (?)", [(v,) for v in missing])
            self._load_ids(missing)
        return cache

    def _load_ids(self, values: Sequence[str]) -> None:
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            for n, v in self.db.execute(f"SELECT n, v FROM str WHERE v IN ({','.join('?' * len(chunk))})", chunk):
                self._ids[v] = n
                self._names[n] = v

    def _lookup(self, values: Iterable[str]) -> list[int]:
        """Ids of strings already known; unknown strings simply match nothing."""
        vals = list(dict.fromkeys(values))
        missing = [v for v in vals if v not in self._ids]
        if missing:
            self._load_ids(missing)
        return [self._ids[v] for v in vals if v in self._ids]

    def _name_map(self, ns: set[int]) -> dict[int, str]:
        missing = [n for n in ns if n not in self._names]
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            for n, v in self.db.execute(f"SELECT n, v FROM str WHERE n IN ({','.join('?' * len(chunk))})", chunk):
                self._names[n] = v
                self._ids[v] = n
        return self._names

    def _rows(self, tuples: Iterable[DbRow]) -> list[Row]:
        raw = list(tuples)
        return decode(raw, self._name_map(numbers(raw)))

    # ---------------------------------------------------------------- writing

    def add_many(self, items: Sequence[tuple[Sequence[Entry], bytes, Parsed]]) -> None:
        """Record several deliveries in one transaction (the server batches concurrent ones)."""
        rows: list[DbRow] = []
        fts: list[tuple[str, str]] = []
        for entries, raw, parsed in items:
            if not entries:
                continue
            row, text = describe(entries[0], raw, parsed, self.domain)
            for e in entries:
                rows.append((e.mailbox, e.key, e.subdir, e.flags, int("S" in e.flags)) + row[5:])
                fts.append(text)
        if rows:
            self._insert(rows, fts)

    def _insert(self, rows: Sequence[DbRow], fts: Sequence[tuple[str, str]]) -> None:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            ids = self._intern(v for row in rows for v in strings(row))
            for row, (subj, body) in zip(rows, fts, strict=True):
                # IGNORE, never REPLACE: a row already there came from a rescan that saw the file more
                # recently (a reader may have marked it seen since the server's batch was made).
                cur = self.db.execute(
                    f"INSERT OR IGNORE INTO msg({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})", encode(row, ids)
                )
                if cur.rowcount == 1:
                    self.db.execute("INSERT INTO fts(rowid, subject, body) VALUES (?,?,?)", (cur.lastrowid, subj, body))
            self.db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self._ids.clear()  # ids interned in the rolled-back transaction no longer exist
            self._names.clear()
            raise MailIndexError(f"index {self.path} could not be updated ({e}); run `workflow reindex`") from None

    def _mtimes(self, mailbox: str) -> tuple[int, int]:
        box = self.maildirs.path(mailbox)
        out = []
        for sub in ("new", "cur"):
            try:
                out.append(os.stat(box / sub).st_mtime_ns)
            except FileNotFoundError:
                out.append(0)
        return out[0], out[1]

    def refresh(self, mailboxes: Iterable[str] | None = None) -> int:
        """Rescan mailboxes whose directories changed since their last scan; returns how many."""
        boxes = self.maildirs.mailboxes() if mailboxes is None else list(mailboxes)
        known = {mb: (n, c) for mb, n, c in self._exec("SELECT mailbox, new_mtime, cur_mtime FROM dirstate")}
        changed = 0
        for mb in boxes:
            now = self._mtimes(mb)
            if known.get(mb) != now:
                self._rescan(mb, now)
                changed += 1
        return changed

    def _rescan(self, mailbox: str, mtimes: tuple[int, int]) -> None:
        box = self._lookup([mailbox])
        have = {
            key: (i, sub, flags)
            for i, key, sub, flags in (
                self._exec("SELECT id, key, subdir, flags FROM msg WHERE box=?", (box[0],)) if box else ()
            )
        }
        add_rows: list[DbRow] = []
        add_fts: list[tuple[str, str]] = []
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
            for table in ("msg", "dirstate", "str"):
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
                batch: list[tuple[DbRow, tuple[str, str]]] = []
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
                    "INSERT INTO fts(rowid, subject, body) VALUES (?,?,?)",
                    [(first + i, s, b) for i, (_, (s, b)) in enumerate(batch)],
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

    # ---------------------------------------------------------------- reading

    def _visible(
        self, mailboxes: Sequence[str] | None, senders: Sequence[str], prefix: str = ""
    ) -> tuple[str, list[object]] | None:
        """SQL for 'in these mailboxes, or sent by these addresses'; None when nothing can match."""
        if mailboxes is None:
            return "1", []
        boxes = self._lookup(mailboxes)
        who = self._lookup(senders) if senders else []
        parts: list[str] = []
        if boxes:
            parts.append(f"{prefix}box IN ({','.join('?' * len(boxes))})")
        if who:
            parts.append(f"{prefix}sender IN ({','.join('?' * len(who))})")
        if not parts:
            return None
        return "(" + " OR ".join(parts) + ")", [*boxes, *who]

    def query(
        self,
        mailboxes: Sequence[str] | None = None,
        *,
        unread: bool = False,
        event: str | None = None,
        state: str | None = None,
        artifact_like: str | None = None,
        message_ids: Sequence[str] | None = None,
        senders: Sequence[str] = (),
    ) -> list[Row]:
        """Rows in ``mailboxes`` (plus, with ``senders``, what those addresses sent)."""
        visible = self._visible(mailboxes, senders)
        if visible is None:
            return []
        where, args = [visible[0]], list(visible[1])
        if unread:
            where.append("seen=0")
        if event:
            where.append("event=?")
            args.append(event)
        if state:
            where.append("state=?")
            args.append(state)
        if artifact_like:
            where.append("artifacts LIKE ? ESCAPE '\\'")
            args.append("%" + re.sub(r"([%_\\])", r"\\\1", artifact_like) + "%")
        if message_ids is not None:
            mids = self._lookup(message_ids)
            if not mids:
                return []
            where.append(f"mid IN ({','.join('?' * len(mids))})")
            args.extend(mids)
        sql = f"SELECT id, {COLUMNS} FROM msg WHERE " + " AND ".join(where) + " ORDER BY date, key, box"
        return self._rows(self._exec(sql, args))

    def thread_part(self, ids: Sequence[str], mailboxes: Sequence[str], senders: Sequence[str] = ()) -> list[Row]:
        """Visible rows that are, or descend from (by recorded root), any of these Message-IDs."""
        ns = self._lookup(ids)
        visible = self._visible(mailboxes, senders)
        if not ns or visible is None:
            return []
        marks = ",".join("?" * len(ns))
        sql = f"SELECT id, {COLUMNS} FROM msg WHERE (root IN ({marks}) OR mid IN ({marks})) AND {visible[0]}"
        return self._rows(self._exec(sql, [*ns, *ns, *visible[1]]))

    def by_root(self, root: str) -> list[Row]:
        """Every stored copy in the thread with this recorded root, in any mailbox (for loop checks)."""
        ns = self._lookup([root])
        if not ns:
            return []
        sql = f"SELECT id, {COLUMNS} FROM msg WHERE root=? OR mid=? ORDER BY date, key"
        return self._rows(self._exec(sql, [ns[0], ns[0]]))

    def spaces(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which of these Message-IDs were delivered into a panel-internal space, and which.
        Message-IDs compare case-sensitively (RFC 5322), but a case variant of an internal id
        is taken for it: nobody may thread onto an internal message by changing its case."""
        if not message_ids:
            return {}
        mids = self._lookup(message_ids)
        out: dict[str, str] = {}
        if mids:
            sql = f"SELECT mid, space FROM msg WHERE space IS NOT NULL AND mid IN ({','.join('?' * len(mids))})"
            names = self._names
            out = {names[m]: sp for m, sp in self._exec(sql, mids)}
        rest = {m.lower(): m for m in message_ids if m not in out}
        if rest:
            sql = (
                "SELECT lower(s.v), m.space FROM msg m JOIN str s ON s.n = m.mid WHERE m.space IS NOT NULL "
                f"AND lower(s.v) IN ({','.join('?' * len(rest))})"
            )
            for low, sp in self._exec(sql, list(rest)):
                out[rest[low]] = sp
        return out

    def search(
        self, text: str, mailboxes: Sequence[str] | None = None, limit: int = 50, senders: Sequence[str] = ()
    ) -> list[Row]:
        query = _fts_query(text)
        visible = self._visible(mailboxes, senders, "m.")
        if visible is None:
            return []
        cols = ", ".join("m." + c.strip() for c in COLUMNS.split(","))
        sql = (
            f"SELECT m.id, {cols} FROM fts JOIN msg m ON m.id = fts.rowid WHERE fts MATCH ? AND {visible[0]} "
            "ORDER BY m.date DESC, m.key DESC, m.box LIMIT ?"
        )
        return self._rows(self._exec(sql, [query, *visible[1], limit]))

    def thread_links(self) -> Iterator[tuple[str, str | None, str]]:
        """(Message-ID, In-Reply-To, References) of every stored copy, as interned numbers in text
        form — threading needs only identity, so the strings are never looked up."""
        yield from self._exec("SELECT CAST(mid AS TEXT), CAST(irt AS TEXT), refs FROM msg WHERE mid IS NOT NULL")

    def message_ids(self) -> set[str]:
        """Every Message-ID with a stored copy."""
        return {v for (v,) in self._exec("SELECT v FROM str WHERE n IN (SELECT mid FROM msg)")}

    def with_artifacts(self) -> list[Row]:
        """Every stored copy that names an artifact, oldest first (for the board and doctor)."""
        return self._rows(self._exec(f"SELECT id, {COLUMNS} FROM msg WHERE artifacts != '' ORDER BY date, key, box"))

    def drift(self) -> list[tuple[str, int, int, int]]:
        """Mailboxes where the index and the files disagree, whatever the directory mtimes say:
        (mailbox, files not indexed, rows without a file, copies whose place or flags changed)."""
        out = []
        names = dict(self._exec("SELECT n, v FROM str WHERE n IN (SELECT DISTINCT box FROM msg)").fetchall())
        rows: dict[str, dict[str, tuple[str, str]]] = {}
        for box, key, sub, flags in self._exec("SELECT box, key, subdir, flags FROM msg"):
            rows.setdefault(names[box], {})[key] = (sub, flags)
        for mailbox in sorted(set(self.maildirs.mailboxes()) | set(rows)):
            have = rows.get(mailbox, {})
            disk = {e.key: (e.subdir, e.flags) for e in self.maildirs.scan(mailbox)}
            unindexed = sum(1 for k in disk if k not in have)
            orphaned = sum(1 for k in have if k not in disk)
            changed = sum(1 for k, v in disk.items() if k in have and have[k] != v)
            if unindexed or orphaned or changed:
                out.append((mailbox, unindexed, orphaned, changed))
        return out

    def count(self) -> int:
        return int(self._exec("SELECT count(*) FROM msg").fetchone()[0])


def reset(path: Path, maildirs: Maildirs, domain: str, progress: Callable[[int, int], None] | None = None) -> int:
    """Delete the index (and its WAL files) and rebuild it from the Maildirs; returns copies
    indexed. Also the repair for a corrupt index file, which cannot even be opened to empty it."""
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with Index(path, maildirs, domain, rebuild_if_new=False) as index:
        index.rebuild(progress)
        return index.count()
