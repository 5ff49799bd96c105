"""Tasks: agentd's durable queue in SQLite — one row per wake of a role, claimed atomically.

Lifecycle (``TaskStatus``, docs/agentd.md): pending → queued → running → completed | failed |
waiting | rejected.
A role has at most one queued task: more trigger mail coalesces into it (its Message-IDs are
added). ``claim`` moves the oldest due queued task of a role that is neither running nor
paused to running, in one IMMEDIATE transaction, and only while fewer than ``max_concurrent``
run. ``recover`` puts tasks a crash left running back to queued. Role state (consecutive
failures, pauses), daily token usage, threads stopped by loop detection, the people's decisions
applied by mail (``decided``) and those made in the cockpit not carried out yet (``undecided``,
``agentd.pending``) live here too.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from workflow.core.db import open_db
from workflow.core.errors import WorkflowError


class TaskStatus(StrEnum):
    """Where a task is in its life."""

    PENDING = "pending"  # waits for an answer (a clarifying question) before it may run
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING = "waiting"  # ran, and now waits for input (the answer asked questions)
    REJECTED = "rejected"


LIVE = (TaskStatus.PENDING, TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.WAITING)
SCHEMA = """
CREATE TABLE IF NOT EXISTS task(
  id INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT NOT NULL, status TEXT NOT NULL,
  mids TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL, due REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, pid INTEGER, started REAL, error TEXT NOT NULL DEFAULT '',
  dead INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS task_status ON task(status, due);
CREATE TABLE IF NOT EXISTS role_state(role TEXT PRIMARY KEY, failures INTEGER NOT NULL DEFAULT 0,
  paused TEXT NOT NULL DEFAULT '', paused_at REAL);
CREATE TABLE IF NOT EXISTS usage(role TEXT NOT NULL, day TEXT NOT NULL, tokens INTEGER NOT NULL,
  PRIMARY KEY(role, day));
CREATE TABLE IF NOT EXISTS spend(role TEXT NOT NULL, day TEXT NOT NULL, microusd INTEGER NOT NULL,
  PRIMARY KEY(role, day));
CREATE TABLE IF NOT EXISTS member_usage(role TEXT NOT NULL, member TEXT NOT NULL, day TEXT NOT NULL,
  tokens INTEGER NOT NULL, microusd INTEGER NOT NULL, PRIMARY KEY(role, member, day));
CREATE TABLE IF NOT EXISTS stopped(root TEXT PRIMARY KEY, reason TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decided(mid TEXT PRIMARY KEY, at REAL NOT NULL, applied INTEGER NOT NULL,
  detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mark(name TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS undecided(mid TEXT PRIMARY KEY, at REAL NOT NULL, data TEXT NOT NULL);
"""
ADDED = (  # columns newer than the table
    ("kind", "TEXT NOT NULL DEFAULT 'mail'"),
    ("ref", "TEXT NOT NULL DEFAULT ''"),
)
MAIL = "mail"  # a role's trigger mail
BRIDGE = "bridge"  # a bridge's mail for one outside conversation (``ref``: its address), run on that mail alone
RUN = (MAIL, BRIDGE)  # the kinds agentd starts runs for


class Task(NamedTuple):
    id: int
    role: str
    status: TaskStatus
    mids: tuple[str, ...]
    created: float
    updated: float
    due: float
    attempts: int
    pid: int | None
    started: float | None
    error: str
    dead: bool
    kind: str = MAIL  # mail | bridge (a bridge's question: ref is its address); older rows: slack | reply
    ref: str = ""  # which of its things (a Slack task, a conversation)


COLS = "id, role, status, mids, created, updated, due, attempts, pid, started, error, dead, kind, ref"


def _task(row: Sequence[Any]) -> Task:
    return Task(
        int(row[0]),
        str(row[1]),
        TaskStatus(row[2]),
        tuple(json.loads(str(row[3]))),
        float(row[4]),
        float(row[5]),
        float(row[6]),
        int(row[7]),
        None if row[8] is None else int(row[8]),
        None if row[9] is None else float(row[9]),
        str(row[10]),
        bool(row[11]),
        str(row[12]),
        str(row[13]),
    )


class Tasks:
    """An open task store; short transactions, safe to share between agentd and its commands."""

    def __init__(self, path: Path) -> None:
        self.db = open_db(path, what="task store", schema=SCHEMA, remedy="move it aside and restart agentd")
        have = {str(r[1]) for r in self.db.execute("PRAGMA table_info(task)")}
        for name, decl in ADDED:
            if name not in have:
                try:
                    self.db.execute(f"ALTER TABLE task ADD COLUMN {name} {decl}")
                except sqlite3.OperationalError as e:  # another process or thread added it meanwhile
                    if "duplicate column" not in str(e):
                        raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Tasks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tx(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    # -- queue

    def enqueue(
        self, role: str, mids: Iterable[str], now: float | None = None, kind: str = MAIL, ref: str = ""
    ) -> tuple[Task, bool]:
        """Coalesce into the role's queued task of the same kind and ref (a bridge's: the same outside
        conversation), or queue a new one; (task, created?)."""
        now = time.time() if now is None else now
        new = list(dict.fromkeys(mids))
        db = self._tx()
        try:
            row = db.execute(
                f"SELECT {COLS} FROM task WHERE role=? AND status='queued' AND kind=? AND ref=? ORDER BY id LIMIT 1",
                (role, kind, ref),
            ).fetchone()
            if row is not None:
                t = _task(row)
                merged = list(dict.fromkeys([*t.mids, *new]))
                db.execute("UPDATE task SET mids=?, updated=? WHERE id=?", (json.dumps(merged), now, t.id))
                db.execute("COMMIT")
                return t._replace(mids=tuple(merged)), False
            cur = db.execute(
                "INSERT INTO task(role, status, mids, created, updated, due, kind, ref) "
                "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?)",
                (role, json.dumps(new), now, now, now, kind, ref),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self.get(int(cur.lastrowid or 0)), True

    def claim(
        self, max_concurrent: int, now: float | None = None, settle: float = 0.0, settle_max: float = 0.0
    ) -> Task | None:
        """Atomically start the oldest due queued task whose role is free and not paused.

        A task that mail keeps coalescing into (a burst) waits until its role's mail has been
        quiet for ``settle`` seconds (at most ``settle_max`` after it was created), so a burst
        becomes one run; a task for a single message starts at once."""
        now = time.time() if now is None else now
        db = self._tx()
        try:
            running = db.execute("SELECT count(*) FROM task WHERE status='running'").fetchone()[0]
            if running >= max_concurrent:
                db.execute("COMMIT")
                return None
            row = db.execute(
                f"SELECT {COLS} FROM task WHERE status='queued' AND kind IN ('mail', 'bridge') AND due<=? "
                "AND (attempts>0 OR updated=created OR updated<=? OR created<=?) "
                "AND role NOT IN (SELECT role FROM task WHERE status='running') "
                "AND role NOT IN (SELECT role FROM role_state WHERE paused!='') ORDER BY due, id LIMIT 1",
                (now, now - settle, now - settle_max),
            ).fetchone()
            if row is None:
                db.execute("COMMIT")
                return None
            t = _task(row)
            db.execute(
                "UPDATE task SET status='running', started=?, updated=?, attempts=attempts+1 WHERE id=? AND status='queued'",
                (now, now, t.id),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self.get(t.id)

    def set_pid(self, task_id: int, pid: int) -> None:
        self.db.execute("UPDATE task SET pid=? WHERE id=?", (pid, task_id))

    def finish(
        self,
        task_id: int,
        status: TaskStatus,
        error: str = "",
        *,
        dead: bool = False,
        retry_at: float | None = None,
        mids: Sequence[str] | None = None,
    ) -> Task:
        """Record how a run ended; with ``retry_at`` the task goes back to queued, due then."""
        now = time.time()
        if retry_at is not None:
            self.db.execute(
                "UPDATE task SET status='queued', due=?, error=?, pid=NULL, updated=? WHERE id=?",
                (retry_at, error, now, task_id),
            )
        else:
            self.db.execute(
                "UPDATE task SET status=?, error=?, dead=?, updated=? WHERE id=?",
                (str(status), error, int(dead), now, task_id),
            )
        if mids is not None:
            self.db.execute("UPDATE task SET mids=? WHERE id=?", (json.dumps(list(mids)), task_id))
        return self.get(task_id)

    def put_back(self, task_id: int, why: str, due: float) -> Task:
        """Queue a claimed task again without counting the attempt (its role was busy, or agentd
        stopped before the run ended)."""
        self.finish(task_id, TaskStatus.QUEUED, why, retry_at=due)
        self.db.execute("UPDATE task SET attempts=max(attempts-1, 0) WHERE id=?", (task_id,))
        return self.get(task_id)

    def left_running(self) -> list[Task]:
        """Tasks a crash of agentd left running (their runs may still be at work: adopt or requeue them)."""
        sql = f"SELECT {COLS} FROM task WHERE status=? AND kind IN (?, ?)"
        return [_task(r) for r in self.db.execute(sql, (TaskStatus.RUNNING.value, *RUN))]

    def requeue(self, task_id: int) -> Task:
        t = self.get(task_id)
        if t.status == "running":
            raise WorkflowError(f"task {task_id} is running; wait for it or stop agentd first")
        self.db.execute(
            "UPDATE task SET status='queued', due=?, dead=0, error='', updated=? WHERE id=?",
            (time.time(), time.time(), task_id),
        )
        return self.get(task_id)

    def get(self, task_id: int) -> Task:
        row = self.db.execute(f"SELECT {COLS} FROM task WHERE id=?", (task_id,)).fetchone()
        if row is None:
            raise WorkflowError(f"no task {task_id}; `agentd status` lists them")
        return _task(row)

    def list(self, statuses: Sequence[TaskStatus] = (), limit: int = 1000) -> list[Task]:
        where = f"WHERE status IN ({','.join('?' * len(statuses))})" if statuses else ""
        args = (*(str(s) for s in statuses), limit)
        return [_task(r) for r in self.db.execute(f"SELECT {COLS} FROM task {where} ORDER BY id DESC LIMIT ?", args)]

    def taken(self) -> set[tuple[str, str]]:
        """(role, Message-ID) pairs already in a live task of that role, or given up on for that role
        (dead-lettered). A message copied to several roles is taken per role: one role's task,
        failure or dead letter never hides the message from another."""
        out: set[tuple[str, str]] = set()
        marks = ",".join("?" * len(LIVE))
        sql = f"SELECT role, mids FROM task WHERE status IN ({marks}) OR dead=1"
        for role, mids in self.db.execute(sql, [str(s) for s in LIVE]):
            out.update((str(role), m) for m in json.loads(mids))
        return out

    # -- role state

    def failures(self, role: str, failed: bool) -> int:
        """Count a consecutive failure (or reset on success); returns the count."""
        if failed:
            self.db.execute(
                "INSERT INTO role_state(role, failures) VALUES (?, 1) "
                "ON CONFLICT(role) DO UPDATE SET failures=failures+1",
                (role,),
            )
        else:
            self.db.execute(
                "INSERT INTO role_state(role, failures) VALUES (?, 0) ON CONFLICT(role) DO UPDATE SET failures=0",
                (role,),
            )
        return int(self.db.execute("SELECT failures FROM role_state WHERE role=?", (role,)).fetchone()[0])

    def pause(self, role: str, why: str) -> None:
        self.db.execute(
            "INSERT INTO role_state(role, paused, paused_at) VALUES (?, ?, ?) "
            "ON CONFLICT(role) DO UPDATE SET paused=excluded.paused, paused_at=excluded.paused_at",
            (role, why, time.time()),
        )

    def resume(self, role: str) -> str:
        row = self.db.execute("SELECT paused FROM role_state WHERE role=?", (role,)).fetchone()
        self.db.execute("UPDATE role_state SET paused='', paused_at=NULL, failures=0 WHERE role=?", (role,))
        return str(row[0]) if row else ""

    def paused(self) -> dict[str, tuple[str, float]]:
        return {
            r: (p, float(at or 0))
            for r, p, at in self.db.execute("SELECT role, paused, paused_at FROM role_state WHERE paused!=''")
        }

    def add_usage(self, role: str, tokens: int, day: str | None = None) -> int:
        day = day or time.strftime("%Y-%m-%d", time.gmtime())
        self.db.execute(
            "INSERT INTO usage(role, day, tokens) VALUES (?, ?, ?) "
            "ON CONFLICT(role, day) DO UPDATE SET tokens=tokens+excluded.tokens",
            (role, day, tokens),
        )
        return int(self.db.execute("SELECT tokens FROM usage WHERE role=? AND day=?", (role, day)).fetchone()[0])

    def add_cost(self, role: str, microusd: int, day: str | None = None) -> None:
        """Count what a run of ``role`` cost (as its agent CLI reported it), in millionths of a dollar."""
        day = day or time.strftime("%Y-%m-%d", time.gmtime())
        self.db.execute(
            "INSERT INTO spend(role, day, microusd) VALUES (?, ?, ?) "
            "ON CONFLICT(role, day) DO UPDATE SET microusd=microusd+excluded.microusd",
            (role, day, microusd),
        )

    def cost_today(self) -> dict[str, float]:
        """Each role's cost today, in dollars."""
        day = time.strftime("%Y-%m-%d", time.gmtime())
        return {r: int(m) / 1e6 for r, m in self.db.execute("SELECT role, microusd FROM spend WHERE day=?", (day,))}

    def add_member_usage(self, role: str, member: str, tokens: int, microusd: int, day: str | None = None) -> None:
        """Count what one member of the panel ``role`` used in a run (its share of the panel's usage)."""
        day = day or time.strftime("%Y-%m-%d", time.gmtime())
        self.db.execute(
            "INSERT INTO member_usage(role, member, day, tokens, microusd) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(role, member, day) DO UPDATE SET tokens=tokens+excluded.tokens, "
            "microusd=microusd+excluded.microusd",
            (role, member, day, tokens, microusd),
        )

    def members_today(self) -> dict[str, dict[str, tuple[int, float]]]:
        """Each panel's members' tokens and cost (dollars) today."""
        day = time.strftime("%Y-%m-%d", time.gmtime())
        out: dict[str, dict[str, tuple[int, float]]] = {}
        rows = self.db.execute(
            "SELECT role, member, tokens, microusd FROM member_usage WHERE day=? ORDER BY 1, 2", (day,)
        )
        for role, member, tokens, microusd in rows:
            out.setdefault(str(role), {})[str(member)] = (int(tokens), int(microusd) / 1e6)
        return out

    def usage_today(self) -> dict[str, int]:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        return {r: int(t) for r, t in self.db.execute("SELECT role, tokens FROM usage WHERE day=?", (day,))}

    # -- loop detection

    def stop_thread(self, root: str, reason: str) -> bool:
        """Stop auto-triggering a thread; True the first time (so it is escalated once)."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO stopped(root, reason, at) VALUES (?, ?, ?)", (root, reason, time.time())
        )
        return cur.rowcount == 1

    def stopped(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT root, reason FROM stopped"))

    # -- decisions by mail

    def decided(self, mids: Iterable[str]) -> set[str]:
        """Which of these messages' decisions were handled already (applied or answered), or are
        being carried out (a decision made in the cockpit, ``agentd.pending``): not decisions by mail."""
        ids = list(dict.fromkeys(mids))
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        sql = f"SELECT mid FROM decided WHERE mid IN ({marks}) UNION SELECT mid FROM undecided WHERE mid IN ({marks})"
        return {str(r[0]) for r in self.db.execute(sql, ids + ids)}

    def record_decision(self, mid: str, applied: bool, detail: str) -> None:
        """A decision handled: applied, or answered saying why not (and no longer pending)."""
        db = self._tx()
        try:
            db.execute(
                "INSERT OR REPLACE INTO decided(mid, at, applied, detail) VALUES (?, ?, ?, ?)",
                (mid, time.time(), int(applied), detail),
            )
            db.execute("DELETE FROM undecided WHERE mid=?", (mid,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def begin_decision(self, mid: str, data: str) -> None:
        """A decision about to be carried out (its mail and its move): pending until recorded."""
        self.db.execute("INSERT OR REPLACE INTO undecided(mid, at, data) VALUES (?, ?, ?)", (mid, time.time(), data))

    def pending_decisions(self) -> tuple[tuple[str, str], ...]:
        """(Message-ID, what ``begin_decision`` kept) of every decision begun and not recorded, oldest first."""
        return tuple((str(m), str(d)) for m, d in self.db.execute("SELECT mid, data FROM undecided ORDER BY at, mid"))

    def mark(self, name: str) -> int | None:
        """A named position (an index row id) kept across restarts; None before the first."""
        row = self.db.execute("SELECT n FROM mark WHERE name=?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def set_mark(self, name: str, n: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO mark(name, n) VALUES (?, ?)", (name, n))
