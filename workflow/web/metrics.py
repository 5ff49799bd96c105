"""Metrics: ``/metrics`` in Prometheus' text format, made with the official ``prometheus_client``.

Read at each scrape from what the project keeps, so any cockpit process answers the same:
messages delivered (the index: each stored copy, by event and recipient mailbox) and refused (the
SMTP server's count by command, code and rule: ``delivery.server.refusals``), runs by role
and result, their duration (a histogram), the queue's depth, tokens and cost by role (agentd's
ledger, all days), and this cockpit's own request latency (a histogram kept in this process).
Left out: SMTP latency — the SMTP server keeps no timing another process can read.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.delivery.server.refusals import counts

RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
WEB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RESULTS = {"completed": "ok", "failed": "failed", "rejected": "rejected", "waiting": "waiting"}


class Project(Collector):
    """The project's numbers, read fresh at each scrape."""

    def __init__(self, app: Any) -> None:
        self.app = app  # an object whose ``app`` attribute is the App now (the server: it reloads)

    def collect(self) -> Iterator[Metric]:
        app: App = self.app.app
        yield from _mail(app)
        yield from _refused(app)
        yield from _ledger(app)


def _mail(app: App) -> Iterator[Metric]:
    delivered = CounterMetricFamily(
        "workflow_messages_delivered", "Messages delivered, by event and recipient mailbox", labels=["event", "mailbox"]
    )
    with app.index() as index:
        index.refresh()
        counted = index.counts()
    for box, event, n in counted:
        delivered.add_metric([event or "mail", box], n)
    yield delivered


def _refused(app: App) -> Iterator[Metric]:
    refused = CounterMetricFamily(
        "workflow_messages_refused",
        "SMTP commands refused, by command, reply code and rule",
        labels=["command", "code", "rule"],
    )
    for command, code, rule, n in counts(app.config.state.refusals):
        refused.add_metric([command, code, rule], n)
    yield refused


def _ledger(app: App) -> Iterator[Metric]:
    from workflow.agentd.tasks import Tasks  # lazy: as the runs page

    runs = CounterMetricFamily("workflow_runs", "Runs ended, by role and result", labels=["role", "result"])
    took = HistogramMetricFamily("workflow_run_duration_seconds", "How long ended runs ran", labels=["role"])
    queue = GaugeMetricFamily("workflow_queue_depth", "Tasks waiting to run, by role", labels=["role"])
    running = GaugeMetricFamily("workflow_runs_running", "Runs running now, by role", labels=["role"])
    tokens = CounterMetricFamily("workflow_tokens", "Tokens the runs used, by role", labels=["role"])
    cost = CounterMetricFamily("workflow_cost_usd", "What the runs cost (USD), by role", labels=["role"])
    try:
        with Tasks(app.config.state.tasks) as t:
            db = t.db
            ended = _rows(db, "SELECT role, status, started, updated FROM task WHERE started IS NOT NULL")
            waiting = _rows(db, "SELECT role, status, count(*) FROM task GROUP BY 1, 2")
            used = _rows(db, "SELECT role, sum(tokens) FROM usage GROUP BY 1")
            spent = _rows(db, "SELECT role, sum(microusd) FROM spend GROUP BY 1")
    except WorkflowError:
        ended, waiting, used, spent = [], [], [], []
    results: dict[tuple[str, str], int] = {}
    durations: dict[str, list[float]] = {}
    for role, status, started, updated in ended:
        result = RESULTS.get(str(status))
        if result is None:
            continue
        results[(str(role), result)] = results.get((str(role), result), 0) + 1
        durations.setdefault(str(role), []).append(max(0.0, float(updated) - float(started)))
    for (role, result), n in sorted(results.items()):
        runs.add_metric([role, result], n)
    for role, seconds in sorted(durations.items()):
        buckets = [(str(b), sum(1 for s in seconds if s <= b)) for b in RUN_BUCKETS]
        took.add_metric([role], [*buckets, ("+Inf", len(seconds))], sum(seconds))
    for role, status, n in waiting:
        if status in ("queued", "pending"):
            queue.add_metric([str(role)], int(n))
        elif status == "running":
            running.add_metric([str(role)], int(n))
    for role, n in used:
        tokens.add_metric([str(role)], int(n or 0))
    for role, n in spent:
        cost.add_metric([str(role)], int(n or 0) / 1e6)
    yield from (runs, took, queue, running, tokens, cost)


def _rows(db: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    try:
        return list(db.execute(sql))
    except sqlite3.OperationalError:  # a store older than the table
        return []


class Metrics:
    """One cockpit's registry: the project's numbers and this server's request latency."""

    def __init__(self, holder: Any) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(Project(holder))
        self.latency = Histogram(
            "workflow_web_request_duration_seconds",
            "How long the cockpit took to answer, by route",
            ["route"],
            buckets=WEB_BUCKETS,
            registry=self.registry,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


KNOWN = frozenset(
    ("/", "/login", "/logout", "/role", "/board", "/inbox", "/thread", "/runs", "/search", "/part", "/transcript")
    + ("/run", "/charts", "/charts.json", "/chart", "/metrics")
)


class Timing:
    """ASGI middleware: each HTTP request's time, by its route — the path of a route of ours,
    ``/act``, ``/static``, else "other" (so a crawler cannot grow the series); not ``/events``,
    whose streams last as long as their pages."""

    def __init__(self, app: Any, latency: Histogram) -> None:
        self.app, self.latency = app, latency

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path == "/events":
            await self.app(scope, receive, send)
            return
        route = (
            path
            if path in KNOWN
            else "/act"
            if path.startswith("/act/")
            else "/static"
            if path.startswith("/static/")
            else "other"
        )
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.latency.labels(route).observe(time.perf_counter() - start)
