"""Reader: the index opened for reading — the queries every reading command and check runs.

``Index`` (``mail.index``) adds writing: refresh, rebuild and the server's inserts. A reader
answers from what is indexed; ``changed`` says which mailboxes moved on since their last scan
(their new/ or cur/ mtime), so a caller refreshes — or, on a short command's fast path, hands
over to the full command — before trusting an answer. Start-up time: this module is on the
short commands' path, so it imports nothing heavy (no ``re``, ``pathlib`` or ``typing``).
"""

from __future__ import annotations

import os
import sqlite3

from workflow.core.diskfull import unreadable
from workflow.core.errors import MailIndexError
from workflow.mail.rows import COLUMNS, Row, decode, numbers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from workflow.mail.rows import DbRow

SCHEMA_VERSION = 4
REBUILD = "run `workflow reindex` to rebuild it from the Maildirs"


def words(text: str) -> list[str]:
    """The words of a search (runs of letters, digits and underscores: ``re``'s ``\\w+``)."""
    out: list[str] = []
    run: list[str] = []
    for ch in text + " ":
        if ch.isalnum() or ch == "_":
            run.append(ch)
        elif run:
            out.append("".join(run))
            run = []
    return out


def _fts_query(text: str) -> str:
    found = words(text)
    if not found:
        raise MailIndexError(f"search text {text!r} has no words to look for")
    return " ".join('"' + w.replace('"', '""') + '"' for w in found)


def mtimes(box_dir: str) -> tuple[int, int]:
    """The mtimes of a mailbox's new/ and cur/ (0 for one that is missing)."""
    out = []
    for sub in ("new", "cur"):
        try:
            out.append(os.stat(os.path.join(box_dir, sub)).st_mtime_ns)
        except FileNotFoundError:
            out.append(0)
    return out[0], out[1]


class Reader:
    """An open index, for reading; use as a context manager, keep it short-lived."""

    def __init__(self, db: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
        self.db = db
        self.path = path
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}

    @classmethod
    def open(cls, path: str) -> Reader | None:
        """The index at ``path`` as it is, or None when there is none yet or it is not current
        (the full command then creates, upgrades or repairs it)."""
        if not os.path.isfile(path):
            return None
        try:
            db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                db.close()
                return None
        except sqlite3.DatabaseError:
            return None
        return cls(db, path)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def changed(self, boxes: Iterable[tuple[str, str]]) -> list[tuple[str, tuple[int, int]]]:
        """Of these (mailbox, directory) pairs, the mailboxes whose new/ or cur/ changed since
        their last scan, with their mtimes now."""
        known = {mb: (n, c) for mb, n, c in self._exec("SELECT mailbox, new_mtime, cur_mtime FROM dirstate")}
        out = []
        for mb, box_dir in boxes:
            now = mtimes(box_dir)
            if known.get(mb) != now:
                out.append((mb, now))
        return out

    def _exec(self, sql: str, args: Sequence[object] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, args)
        except sqlite3.DatabaseError as e:
            raise unreadable(MailIndexError, "index", self.path, e, "run `workflow reindex` to rebuild it") from None

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
            args.append("%" + "".join("\\" + c if c in "%_\\" else c for c in artifact_like) + "%")
        if message_ids is not None:
            mids = self._lookup(message_ids)
            if not mids:
                return []
            where.append(f"mid IN ({','.join('?' * len(mids))})")
            args.extend(mids)
        sql = f"SELECT id, {COLUMNS} FROM msg WHERE " + " AND ".join(where) + " ORDER BY date, key, box"
        return self._rows(self._exec(sql, args))

    def sent_after(self, row_id: int, senders: Sequence[str], limit: int = 500) -> list[Row]:
        """Rows indexed after row ``row_id`` (ids only grow) of mail ``senders`` sent, oldest first."""
        who = self._lookup(senders)
        if not who:
            return []
        marks = ",".join("?" * len(who))
        sql = f"SELECT id, {COLUMNS} FROM msg WHERE id > ? AND sender IN ({marks}) ORDER BY id LIMIT ?"
        return self._rows(self._exec(sql, [row_id, *who, limit]))

    def counts(self) -> list[tuple[str, str | None, int]]:
        """(mailbox, event, how many copies) for every pair the index holds — a count in SQL,
        no row read (``/metrics`` asks at each scrape)."""
        sql = "SELECT s.v, m.event, count(*) FROM msg m JOIN str s ON s.n = m.box GROUP BY 1, 2 ORDER BY 1, 2"
        return [(str(box), None if event is None else str(event), int(n)) for box, event, n in self._exec(sql)]

    def last_id(self) -> int:
        """The id of the row indexed last (0: none)."""
        return int(self._exec("SELECT COALESCE(MAX(id), 0) FROM msg").fetchone()[0])

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

    def artifact_marks(self) -> dict[int, tuple[int, str, str, str]]:
        """(mailbox number, key, subdir, flags) of every copy that names an artifact, by id: what
        changes when a copy is added, renamed, flagged or removed (``mail.rowcache``)."""
        return {
            i: (b, k, s, f)
            for i, b, k, s, f in self._exec("SELECT id, box, key, subdir, flags FROM msg WHERE artifacts != ''")
        }

    def artifact_rows_after(self, row_id: int) -> list[tuple[int, Row]]:
        """(mailbox number, row) of every copy that names an artifact indexed after row ``row_id``
        (ids only grow): the copies added since a reader last looked (``mail.rowcache``)."""
        raw = list(self._exec(f"SELECT id, {COLUMNS} FROM msg WHERE id > ? AND artifacts != ''", (row_id,)))
        return [(int(t[1]), r) for t, r in zip(raw, self._rows(raw), strict=True)]

    def artifact_count(self, up_to: int) -> tuple[int, int]:
        """How many copies that name an artifact have an id up to ``up_to``, and the highest id
        ever given (it only grows, until a rebuild starts again): what a deletion or a rebuild
        changes (``mail.rowcache``)."""
        n = int(self._exec("SELECT count(*) FROM msg WHERE id <= ? AND artifacts != ''", (up_to,)).fetchone()[0])
        seq = self._exec("SELECT seq FROM sqlite_sequence WHERE name='msg'").fetchone()
        return n, int(seq[0]) if seq else 0

    def rows_by_id(self, ids: Sequence[int]) -> list[Row]:
        """The stored copies with these ids (in no particular order)."""
        raw: list[DbRow] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            raw += self._exec(f"SELECT id, {COLUMNS} FROM msg WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        return self._rows(raw)

    def count(self) -> int:
        return int(self._exec("SELECT count(*) FROM msg").fetchone()[0])
