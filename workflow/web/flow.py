"""Flow: the numbers behind the cockpit's charts, from agentd's ledger and the project's git.

From git (``git log --name-status -M`` over the artifact roots): each day, how many artifacts
entered and left each state (a state is the folder under a root: ``specs/todo/x.md``), and how
long artifacts stayed in a state before they left it (median and 90th percentile, in hours).
From the ledger (the task store): runs per role per day and how many failed; tokens and cost per
role per day beside the role's daily token budget; and the queue's depth — tasks waiting, now per
role, and at the end of each day.
"""

from __future__ import annotations

import calendar
import sqlite3
import time
from collections import Counter, defaultdict
from typing import Any

from workflow.app import App
from workflow.artifacts.gitrepo import Repo
from workflow.core.errors import GitError, WorkflowError

DAY = 86400.0


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))] if s else 0.0


def _state(path: str, roots: tuple[str, ...]) -> tuple[str, str] | None:
    """(state, name) of an artifact's path, or None for a path not in a root's state folder."""
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            parts = path[len(prefix) :].split("/")
            if len(parts) >= 2:
                return parts[0], "/".join(parts[1:])
    return None


def _ours(repo: Repo, line: str) -> str:
    """A --name-status line with its top-relative paths made project-relative (others left as they are)."""
    cols = line.split("\t")
    return "\t".join([cols[0], *((repo.to_project(c) or c) for c in cols[1:])]) if len(cols) > 1 else line


def moves(app: App) -> list[tuple[float, str, str | None, str | None]]:
    """Each artifact's changes of state, oldest first: (time, name, from state, to state)."""
    roots = app.config.artifact_roots
    repo = Repo.find(app.config)
    if repo is None:
        return []
    try:  # git only through gitcmd (the owner's pinned git): paths come back from the top, made ours again
        out = repo.git(
            "log", "--reverse", "-M", "--name-status", "--format=@%ct", "HEAD", "--", *(repo.to_top(r) for r in roots)
        )
    except GitError:  # no commit yet
        return []
    out = "\n".join(_ours(repo, line) for line in out.splitlines())
    found: list[tuple[float, str, str | None, str | None]] = []
    when = 0.0
    for line in out.splitlines():
        if line.startswith("@"):
            when = float(line[1:] or 0)
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            continue
        kind = cols[0][:1]
        if kind == "R" and len(cols) == 3:
            a, b = _state(cols[1], roots), _state(cols[2], roots)
            if a and b and a[0] != b[0]:
                found.append((when, b[1], a[0], b[0]))
            elif b and not a:
                found.append((when, b[1], None, b[0]))
            elif a and not b:
                found.append((when, a[1], a[0], None))
        elif kind == "A" and (s := _state(cols[1], roots)):
            found.append((when, s[1], None, s[0]))
        elif kind == "D" and (s := _state(cols[1], roots)):
            found.append((when, s[1], s[0], None))
    return found


def flow(app: App) -> dict[str, Any]:
    """Per day and state: artifacts that entered and that left; and time in state (hours)."""
    entered: Counter[tuple[str, str]] = Counter()
    left: Counter[tuple[str, str]] = Counter()
    since: dict[str, tuple[str, float]] = {}
    stays: dict[str, list[float]] = defaultdict(list)
    for when, name, a, b in moves(app):
        day = _day(when)
        if a is not None:
            left[(day, a)] += 1
            was = since.pop(name, None)
            if was is not None and was[0] == a:
                stays[a].append((when - was[1]) / 3600)
        if b is not None:
            entered[(day, b)] += 1
            since[name] = (b, when)
    days = sorted({d for d, _ in entered} | {d for d, _ in left})
    states = sorted({s for _, s in entered} | {s for _, s in left})
    return {
        "flow": [
            {"day": d, "state": s, "entered": entered[(d, s)], "left": left[(d, s)]}
            for d in days
            for s in states
            if entered[(d, s)] or left[(d, s)]
        ],
        "time_in_state": [
            {
                "state": s,
                "stays": len(stays[s]),
                "median_hours": round(_quantile(stays[s], 0.5), 3),
                "p90_hours": round(_quantile(stays[s], 0.9), 3),
            }
            for s in states
            if stays[s]
        ],
    }


def _rows(db: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    try:
        return list(db.execute(sql))
    except sqlite3.OperationalError:  # a store older than the table
        return []


def ledger(app: App, now: float | None = None) -> dict[str, Any]:
    """Runs per role per day (and failures), tokens and cost per role per day with its budget,
    and the queue's depth now (per role) and at the end of each day a task was made."""
    from workflow.agentd.tasks import Tasks  # lazy: only the charts read the whole ledger

    now = time.time() if now is None else now
    opts = app.config.agentd
    try:
        tasks = Tasks(app.config.state.tasks)
    except WorkflowError:
        return {"runs": [], "usage": [], "queue": [], "queue_now": []}
    with tasks:
        db = tasks.db
        runs = _rows(
            db,
            "SELECT role, date(updated, 'unixepoch'), count(*), sum(status = 'failed') FROM task "
            "WHERE started IS NOT NULL AND status IN ('completed', 'failed', 'waiting', 'rejected') "
            "GROUP BY 1, 2 ORDER BY 2, 1",
        )
        tokens = {(str(r), str(d)): int(n) for r, d, n in _rows(db, "SELECT role, day, tokens FROM usage")}
        cost = {(str(r), str(d)): int(n) for r, d, n in _rows(db, "SELECT role, day, microusd FROM spend")}
        made = _rows(db, "SELECT role, created, started, status FROM task")
        waiting = _rows(db, "SELECT role, count(*) FROM task WHERE status IN ('queued', 'pending') GROUP BY 1")
    usage = [
        {
            "day": d,
            "role": r,
            "tokens": tokens.get((r, d), 0),
            "cost_usd": round(cost.get((r, d), 0) / 1e6, 6),
            "budget_tokens": int(opts.role_budgets.get(r, opts.daily_tokens)),
        }
        for r, d in sorted(set(tokens) | set(cost), key=lambda k: (k[1], k[0]))
    ]
    queue = []
    for d in sorted({_day(float(c)) for _, c, _, _ in made}):
        end = min(now, calendar.timegm(time.strptime(d, "%Y-%m-%d")) + DAY)
        depth = sum(
            1
            for _, c, s, st in made
            if float(c) <= end and (s is None and st in ("queued", "pending") or s is not None and float(s) > end)
        )
        queue.append({"day": d, "depth": depth})
    return {
        "runs": [{"day": str(d), "role": str(r), "runs": int(n), "failed": int(f or 0)} for r, d, n, f in runs],
        "usage": usage,
        "queue": queue,
        "queue_now": [{"role": str(r), "depth": int(n)} for r, n in sorted(waiting)],
    }


def charts(app: App) -> dict[str, Any]:
    """Every chart's numbers (what ``/charts.json`` serves)."""
    return {**flow(app), **ledger(app)}
