"""Store: the Slack bridge's durable state in SQLite — events seen, requests, their steps, the todo list.

A task is one Slack request: ``pending`` (a clarifying question was asked in the thread) →
``queued`` (its question mail went to its role; agentd runs it) → ``completed`` | ``failed`` |
``waiting`` (the answer asks something back) | ``rejected`` (a thumbs-down). The bridge
schedules nothing: agentd runs the role, and the answer comes back by mail. Each task's side
effects are recorded before they are done — the question mail it sends (its bytes, so a restart
sends the same message again, stored once), each reaction and post (``step``) — so a retry or a
restart never sends, reacts or posts twice. Rows come back as typed ``SlackTask``s.
"""

from __future__ import annotations

import enum
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from workflow.bridges.slack.intents import Intent
from workflow.core.db import open_db


class Status(enum.StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING = "waiting"
    REJECTED = "rejected"


OPEN = (Status.PENDING, Status.QUEUED, Status.WAITING)
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
    "autonomy, role, session, resume, asked"
)
SETTABLE = ("prompt", "status", "result", "session", "resume", "asked")
ADDED = (  # columns newer than the table
    ("role", "TEXT NOT NULL DEFAULT ''"),
    ("session", "TEXT NOT NULL DEFAULT ''"),
    ("resume", "TEXT NOT NULL DEFAULT ''"),
    ("asked", "TEXT NOT NULL DEFAULT ''"),
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
    status: Status
    result: str
    created: float
    updated: float
    autonomy: int
    role: str  # the role asked ("" for the todo intents, which ask none)
    session: str  # the agent session its answer was given in
    resume: str  # the earlier session that answer went on with ("" for a new one)
    asked: str  # the Message-ID of its question mail ("" before it is sent)

    @property
    def where(self) -> Where:
        return Where(self.channel, self.ts, self.thread_ts)


def _task(row: tuple[Any, ...]) -> SlackTask:
    values = list(row)
    values[10] = Status(values[10])
    return SlackTask(*values)


class SlackStore:
    """The bridge's store; one connection shared by the receiver and the loop (writes locked)."""

    def __init__(self, path: Path) -> None:
        self.db = open_db(path, what="Slack task store", schema=SCHEMA)
        have = {str(r[1]) for r in self.db.execute("PRAGMA table_info(task)")}
        for name, decl in ADDED:
            if name not in have:
                self.db.execute(f"ALTER TABLE task ADD COLUMN {name} {decl}")
        self.db.execute("CREATE INDEX IF NOT EXISTS task_asked ON task(asked)")
        self.lock = threading.Lock()

    def seen(self, event_id: str) -> bool:
        """Record an event id; True when it was already there (a retried delivery)."""
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO event(id, at) VALUES (?, ?)", (event_id, time.time()))
        return cur.rowcount == 0

    def add(self, where: Where, user: str, text: str, it: Intent, status: Status, role: str) -> int:
        now = time.time()
        row = (*where, user, text, it.intent, it.summary, it.execution_prompt, it.clarify_question, str(status))
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO task(channel, ts, thread_ts, user, text, intent, summary, prompt, clarify, status, created, "
                "updated, role) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (*row, now, now, role),
            )
        return int(cur.lastrowid or 0)

    def get(self, task_id: int) -> SlackTask | None:
        row = self.db.execute(f"SELECT {COLS} FROM task WHERE id=?", (task_id,)).fetchone()
        return _task(row) if row else None

    def by_thread(self, thread_ts: str) -> list[SlackTask]:
        rows = self.db.execute(f"SELECT {COLS} FROM task WHERE thread_ts=? ORDER BY id", (thread_ts,))
        return [_task(r) for r in rows]

    def by_question(self, message_id: str) -> SlackTask | None:
        """The task whose question mail has this Message-ID."""
        row = self.db.execute(f"SELECT {COLS} FROM task WHERE asked=? AND asked!=''", (message_id,)).fetchone()
        return _task(row) if row else None

    def in_status(self, status: Status) -> list[SlackTask]:
        return [_task(r) for r in self.db.execute(f"SELECT {COLS} FROM task WHERE status=? ORDER BY id", (status,))]

    def set(self, task_id: int, **fields: str) -> None:
        """Update a task's prompt, status, result, session, resume or question."""
        bad = set(fields) - set(SETTABLE)
        if bad:
            raise ValueError(f"a Slack task has no settable {', '.join(sorted(bad))}")
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            self.db.execute(
                f"UPDATE task SET {cols}, updated=? WHERE id=?", (*map(str, fields.values()), time.time(), task_id)
            )

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
