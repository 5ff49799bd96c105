"""Bridged runs: a run a bridge asks for, on the same books as agentd's own.

A Slack task or a reply-loop session is one run of a role through run-role's transaction (its
``go``: the role's lock, containment, the sandbox, commit or roll back). ``run`` records it in
agentd's task store as a running task of its ``kind`` (``agentd status`` lists it, and it counts
in ``max_concurrent`` and against the one-run-per-role rule), refuses it while the role is paused
or already running (the bridge keeps its work and tries later), and books how it ended in the
``Ledger``: tokens and cost against the role's daily budget, consecutive failures toward
``pause_after``. A run whose bridge dies is recorded failed by the next bridged run or by agentd.
A bridge's own model calls (its classifier) are ``book``ed against an account of their own, and
``spent`` says when that account's daily budget is used up (the bridge falls back to keywords).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from workflow.agentd.ledger import Ledger, record
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.agents import locks
from workflow.agents.report import RunReport, from_result
from workflow.agents.runrole import Outcome
from workflow.app import App


class Bridged(NamedTuple):
    outcome: Outcome | None  # None: it did not run (``waits`` says why)
    report: RunReport | None
    waits: str = ""  # the role is paused (why) or running already


def run(
    app: App,
    kind: str,
    ref: str,
    role: str,
    go: Callable[[], Outcome],
    mids: Sequence[str] = (),
    say: Callable[[str], None] = lambda line: None,
) -> Bridged:
    """Run ``go`` (one run of ``role`` for a bridge's ``kind`` of work, ``ref`` naming which) on agentd's books."""
    path = app.config.state.agentd_log

    def log(event: str, **fields: Any) -> None:
        record(path, event, fields)

    with Tasks(app.config.state.tasks) as tasks:
        for gone in tasks.bridged_left(locks.pid_alive):
            log("failed", role=gone.role, task=gone.id, kind=gone.kind, ref=gone.ref, error="its bridge stopped")
        t = tasks.begin_run(role, kind, ref, mids, os.getpid())
        if t is None:
            why = tasks.paused().get(role, ("", 0.0))[0]
            return Bridged(None, None, f"{role} is paused: {why}" if why else f"{role} is running")
        log("started", role=role, task=t.id, kind=kind, ref=ref, pid=os.getpid())
        started = time.time()
        try:
            outcome = go()
        except BaseException as e:  # interrupted: its transaction rolled back; the bridge's work waits
            tasks.finish(t.id, TaskStatus.FAILED, f"interrupted ({type(e).__name__})")
            raise
        report = from_result(outcome.result, tuple(r.message_id or "" for r in outcome.handed), outcome.busy)
        ledger = Ledger(app, app.config.agentd, tasks, log)
        if outcome.busy:  # a run from a shell held the role's lock: nothing ran
            tasks.forget(t.id)
            log("busy", role=role, task=t.id, kind=kind, ref=ref, holder=outcome.busy)
        elif report.ok:
            ledger.ended(t, report, time.time() - started)
        else:
            ledger.failed(t, report.error or "the run failed", report)
        paused = tasks.paused().get(role)
        if paused:
            say(f"{role} is paused now: {paused[0]}")
    return Bridged(outcome, report)


def book(app: App, account: str, usage: Mapping[str, int]) -> None:
    """Count what a bridge's own model call (a classifier's) cost against ``account``'s daily budget."""
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    if tokens:
        with Tasks(app.config.state.tasks) as tasks:
            tasks.add_usage(account, tokens)


def spent(app: App, account: str) -> str:
    """Why ``account`` may not call the model today ("" while its daily token budget lasts)."""
    opts = app.config.agentd
    limit = int(opts.role_budgets.get(account, opts.daily_tokens))
    if not limit:
        return ""
    with Tasks(app.config.state.tasks) as tasks:
        used = tasks.usage_today().get(account, 0)
    return f"{account} spent its daily token budget ({used} > {limit})" if used > limit else ""
