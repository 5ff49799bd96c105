"""Queue: the Slack bridge's durable state in SQLite — events seen, tasks, the local todo list.

A task is one Slack request: pending (asked a clarifying question) → queued → running →
completed | failed | waiting | rejected (``TaskStatus``, the same life as agentd's tasks).
``claim`` starts the oldest due queued task atomically while fewer than ``max_concurrent`` run,
one task per role at a time (a busy role's tasks wait their turn, sending nothing meanwhile);
``recover`` queues again what a crash left running. Each task's side effects are recorded as
they happen — the question mail it sent, the reactions it put (``step``) — so a retry or a
restart never sends or reacts twice. Rows come back as typed ``SlackTask``s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from workflow.agentd.tasks import TaskStatus
from workflow.bridges.slack.intents import Intent
from workflow.core.db import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS event(id TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS task(id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, ts TEXT NOT NULL,
  thread_ts TEXT NOT NULL, user TEXT NOT NULL, text TEXT NOT NULL, intent TEXT NOT NULL, summary TEXT NOT NULL,
  prompt TEXT NOT NULL, clarify TEXT, status TEXT NOT NULL, result TEXT NOT NULL DEFAULT '', created REAL NOT NULL,
  updated REAL NOT NULL, autonomy INTEGER NOT NULL DEFAULT 2);
CREATE INDEX IF NOT EXISTS task_thread ON task(thread_ts);
CREATE TABLE IF NOT EXISTS step(task INTEGER NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(task, kind, value));
CREATE TABLE IF NOT EXISTS todo(id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,
  created REAL NOT NULL);
"""
COLS = (
    "id, channel, ts, thread_ts, user, text, intent, summary, prompt, clarify, status, result, created, updated, "
    "autonomy, role, due, session, resume"
)
SETTABLE = ("prompt", "status", "result", "due", "session", "resume")
ADDED = (  # columns newer than the table
    ("role", "TEXT NOT NULL DEFAULT ''"),
    ("due", "REAL NOT NULL DEFAULT 0"),
    ("session", "TEXT NOT NULL DEFAULT ''"),
    ("resume", "TEXT NOT NULL DEFAULT ''"),
)


class Where(NamedTuple):
    """A Slack message: where to react to it and where its thread is."""

    channel: str
    ts: str
    thread_ts: str


class SlackTask(NamedTuple):
    id: int
    channel: str
    ts: str
    thread_ts: str
    user: str
    text: str
    intent: str
    summary: str
    prompt: str
    clarify: str | None
    status: TaskStatus
    result: str
    created: float
    updated: float
    autonomy: int
    role: str  # the role that runs it ("" for the todo intents, which need none)
    due: float  # not claimed before then (a busy role's task waits)
    session: str  # the agent session its run reported (a follow-up in the thread resumes it)
    resume: str  # a follow-up: the earlier task's session to resume ("" for a new run)

    @property
    def where(self) -> Where:
        return Where(self.channel, self.ts, self.thread_ts)


def _task(row: tuple[Any, ...]) -> SlackTask:
    values = list(row)
    values[10] = TaskStatus(values[10])
    return SlackTask(*values)


class TaskQueue:
    """The bridge's store; one connection shared by the receiver and the workers (writes locked)."""

    def __init__(self, path: Path) -> None:
        self.db = open_db(path, what="Slack task store", schema=SCHEMA)
        have = {str(r[1]) for r in self.db.execute("PRAGMA table_info(task)")}
        for name, decl in ADDED:
            if name not in have:
                self.db.execute(f"ALTER TABLE task ADD COLUMN {name} {decl}")
        self.lock = threading.Lock()

    def seen(self, event_id: str) -> bool:
        """Record an event id; True when it was already there (a retried delivery)."""
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO event(id, at) VALUES (?, ?)", (event_id, time.time()))
        return cur.rowcount == 0

    def add(
        self, where: Where, user: str, text: str, it: Intent, status: TaskStatus, role: str, resume: str = ""
    ) -> int:
        now = time.time()
        row = (
            *where,
            user,
            text,
            it.intent,
            it.summary,
            it.execution_prompt,
            it.clarify_question,
            str(status),
            now,
            now,
            role,
            resume,
        )
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO task(channel, ts, thread_ts, user, text, intent, summary, prompt, clarify, status, created, "
                "updated, role, resume) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
        return int(cur.lastrowid or 0)

    def get(self, task_id: int) -> SlackTask | None:
        row = self.db.execute(f"SELECT {COLS} FROM task WHERE id=?", (task_id,)).fetchone()
        return _task(row) if row else None

    def by_thread(self, thread_ts: str) -> list[SlackTask]:
        rows = self.db.execute(f"SELECT {COLS} FROM task WHERE thread_ts=? ORDER BY id", (thread_ts,))
        return [_task(r) for r in rows]

    def set(self, task_id: int, **fields: str | float) -> None:
        """Update a task's prompt, status, result, due time, session or resume."""
        bad = set(fields) - set(SETTABLE)
        if bad:
            raise ValueError(f"a Slack task has no settable {', '.join(sorted(bad))}")
        cols = ", ".join(f"{k}=?" for k in fields)
        values = [str(v) if not isinstance(v, float) else v for v in fields.values()]
        with self.lock:
            self.db.execute(f"UPDATE task SET {cols}, updated=? WHERE id=?", (*values, time.time(), task_id))

    # -- steps: what a task has done already (idempotent by task and step)

    def done(self, task_id: int, kind: str) -> list[str]:
        rows = self.db.execute("SELECT value FROM step WHERE task=? AND kind=?", (task_id, kind))
        return [str(v) for (v,) in rows]

    def record(self, task_id: int, kind: str, value: str) -> bool:
        """Record a step; False when it was recorded already (so it is not done again)."""
        with self.lock:
            cur = self.db.execute(
                "INSERT OR IGNORE INTO step(task, kind, value) VALUES (?,?,?)", (task_id, kind, value)
            )
        return cur.rowcount == 1

    def claim(self, max_concurrent: int, now: float | None = None) -> int | None:
        """Start the oldest due queued task whose role has no task running, while fewer than
        ``max_concurrent`` run; its id, or None."""
        now = time.time() if now is None else now
        running_, queued = TaskStatus.RUNNING.value, TaskStatus.QUEUED.value
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                running = self.db.execute("SELECT count(*) FROM task WHERE status=?", (running_,)).fetchone()[0]
                row = None
                if running < max_concurrent:
                    row = self.db.execute(
                        "SELECT id FROM task WHERE status=? AND due<=? AND (role='' OR role NOT IN "
                        "(SELECT role FROM task WHERE status=?)) ORDER BY id LIMIT 1",
                        (queued, now, running_),
                    ).fetchone()
                if row is not None:
                    self.db.execute(
                        "UPDATE task SET status=?, updated=? WHERE id=? AND status=?", (running_, now, row[0], queued)
                    )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return int(row[0]) if row else None

    def recover(self) -> int:
        """Queue again the tasks a crash left running; how many."""
        with self.lock:
            cur = self.db.execute(
                "UPDATE task SET status=?, updated=? WHERE status=?",
                (TaskStatus.QUEUED.value, time.time(), TaskStatus.RUNNING.value),
            )
        return cur.rowcount

    def counts(self) -> dict[str, int]:
        return {str(s): int(n) for s, n in self.db.execute("SELECT status, count(*) FROM task GROUP BY status")}

    # -- the local todo list

    def add_todo(self, text: str) -> None:
        with self.lock:
            self.db.execute("INSERT INTO todo(text, created) VALUES (?, ?)", (text, time.time()))

    def open_todos(self) -> list[tuple[int, str]]:
        return [(int(i), str(x)) for i, x in self.db.execute("SELECT id, text FROM todo WHERE done=0 ORDER BY id")]

    def complete_todo(self, todo_id: int) -> bool:
        with self.lock:
            cur = self.db.execute("UPDATE todo SET done=1 WHERE id=? AND done=0", (todo_id,))
        return cur.rowcount == 1
