"""Status: what ``agentd status`` shows — the queue, running roles, pauses, oldest unread mail.

Read from the task store, the run locks and the index; typed rows, with ``to_dict`` giving the
``--json`` shape.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from workflow.agentd.tasks import Task, Tasks, TaskStatus
from workflow.agents import locks, spend
from workflow.agents.report import read as read_report
from workflow.app import App
from workflow.mail.inbox import select


class Queued(NamedTuple):
    task: int
    role: str
    messages: int
    due_in: int  # seconds until it may start
    attempts: int
    error: str


class Running(NamedTuple):
    task: int
    role: str
    pid: int | None  # the run lock's holder when there is one
    age: int  # seconds since it started
    kind: str = "mail"  # mail (agentd's own run) | slack | reply (a run a bridge asked for)
    ref: str = ""  # which Slack task or conversation


class Failure(NamedTuple):
    task: int
    role: str
    dead: bool
    error: str
    kind: str = "mail"
    ref: str = ""
    ago: int = 0  # seconds since it ended
    took: int = 0  # seconds its last attempt ran (0: it never started)


class Done(NamedTuple):
    task: int
    role: str
    kind: str
    ref: str
    ago: int  # seconds since it ended
    took: int = 0  # seconds it ran
    log: str = ""  # the run's log (its tool calls, moves, mail sent)
    transcript: str = ""  # its agent CLI's transcript, when the CLI keeps one


class Daemon(NamedTuple):
    """The agentd at work on this mail root."""

    pid: int
    host: str
    since: float


class DaemonStatus(NamedTuple):
    daemon: Daemon | None  # None: no agentd runs for this mail root
    queued: tuple[Queued, ...]
    running: tuple[Running, ...]
    paused: Mapping[str, str]  # role → why
    oldest_unread: Mapping[str, int]  # role → age in seconds of its oldest unread trigger mail
    recent_failures: tuple[Failure, ...]
    tokens_today: Mapping[str, int]
    stopped_threads: Mapping[str, str]  # thread root → why loop detection stopped it
    cost_today: Mapping[str, float] = MappingProxyType({})  # role → dollars its agent CLIs reported today
    recent: tuple[Done, ...] = ()  # the last runs that succeeded, newest first
    members_today: Mapping[str, Mapping[str, tuple[int, float]]] = MappingProxyType({})  # panel → member → tokens, $

    def to_dict(self) -> dict[str, Any]:
        return {
            "daemon": self.daemon._asdict() if self.daemon else None,
            "queued": [q._asdict() for q in self.queued],
            "running": [r._asdict() for r in self.running],
            "paused": dict(self.paused),
            "oldest_unread": dict(self.oldest_unread),
            "recent_failures": [f._asdict() for f in self.recent_failures],
            "tokens_today": dict(self.tokens_today),
            "stopped_threads": dict(self.stopped_threads),
            "cost_today": dict(self.cost_today),
            "recent": [d._asdict() for d in self.recent],
            "members_today": {
                p: {m: {"tokens": t, "cost": c} for m, (t, c) in ms.items()} for p, ms in self.members_today.items()
            },
        }


def status(app: App) -> DaemonStatus:
    """Where agentd stands now (it need not be running)."""
    now = time.time()
    with Tasks(app.config.state.tasks) as tasks:
        queued = tasks.list((TaskStatus.QUEUED, TaskStatus.PENDING, TaskStatus.WAITING))
        running = tasks.list((TaskStatus.RUNNING,))
        failed = tasks.list((TaskStatus.FAILED,), 10)
        done = tasks.list((TaskStatus.COMPLETED,), 10)
        paused = tasks.paused()
        usage = {**tasks.usage_today(), **spend.today(app.config.state)}
        cost = tasks.cost_today()
        members = tasks.members_today()
        stopped = tasks.stopped()
    oldest: dict[str, int] = {}
    with app.index() as index:
        for name in app.roster.roles:
            role = app.roster.roles[name]
            if role.mode != "async" or not role.triggers:
                continue
            boxes = app.roster.mailboxes_of(name)
            index.refresh(boxes)
            rows = select(index, boxes)
            if rows:
                oldest[name] = min(r.date for r in rows)
    holders = {i.name: i for i in locks.scan(app.config.state)}
    lock = locks.read(app.config.state.daemon_lock)
    alive = lock is not None and locks.stale(lock, app.config.agentd.lock_ttl) is None
    return DaemonStatus(
        daemon=Daemon(lock.pid, lock.host, lock.started) if lock is not None and alive else None,
        queued=tuple(
            Queued(t.id, t.role, len(t.mids), max(0, round(t.due - now)), t.attempts, t.error) for t in queued
        ),
        running=tuple(
            Running(
                t.id,
                t.role,
                holders[t.role].pid if t.role in holders else t.pid,
                round(now - (t.started or now)),
                t.kind,
                t.ref,
            )
            for t in running
        ),
        paused={r: why for r, (why, _) in paused.items()},
        oldest_unread={r: round(now - d) for r, d in sorted(oldest.items())},
        recent_failures=tuple(
            Failure(t.id, t.role, t.dead, t.error[:200], t.kind, t.ref, round(now - t.updated), _took(t))
            for t in failed
        ),
        tokens_today=usage,
        stopped_threads=stopped,
        cost_today=cost,
        recent=tuple(_done(app, t, round(now - t.updated)) for t in done),
        members_today=members,
    )


def _took(t: Task) -> int:
    """How long a run that ended ran: from its start to its end (0 when it never started)."""
    return max(0, round(t.updated - t.started)) if t.started else 0


def _done(app: App, t: Task, ago: int) -> Done:
    """A run that ended well, with its log and (from its report) its CLI's transcript, when still there."""
    runs = app.config.state.runs
    log = runs / f"task-{t.id}.log"
    report = read_report(runs / f"task-{t.id}.json")
    transcript = report.transcript if report is not None and os.path.isfile(report.transcript) else ""
    return Done(t.id, t.role, t.kind, t.ref, ago, _took(t), str(log) if log.is_file() else "", transcript)
