"""Run page: one run of agentd's, for ``/run?task=N`` — its status, when it started and how long
it ran, its tokens and cost, the trigger mail (linked to its thread where the viewer may read
it), and its transcript read from the backend's own records (``transcripts``).

It is shown only to those who read the run's role's mail (``Sight.reads_role``; the owner reads
all); to anyone else the run does not exist (``None``: the page answers 404, as a thread not
theirs does).
"""

from __future__ import annotations

from typing import NamedTuple

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.policy.visibility import Sight
from workflow.web import runs
from workflow.web.transcripts import Step, steps


class Trigger(NamedTuple):
    mid: str
    subject: str  # "" when the viewer may not read it (then not linked)
    readable: bool


class RunPage(NamedTuple):
    task: int
    role: str
    kind: str
    ref: str
    status: str
    attempts: int
    created: float
    started: float | None
    ended: float | None  # None while it runs or waits
    took: float | None  # seconds it ran
    tokens: int
    input_tokens: int
    output_tokens: int
    cost: float
    turns: int
    error: str
    summary: str
    triggers: tuple[Trigger, ...]
    steps: tuple[Step, ...]
    transcript: bool  # a transcript was found (``/transcript?task=N`` serves it raw)
    log: str


ENDED = ("completed", "failed", "rejected", "waiting")


def run_page(app: App, sight: Sight, task: int) -> RunPage | None:
    """Run ``task`` as ``sight`` may see it, or None: no such run, or not the viewer's to read."""
    from workflow.agentd.tasks import Tasks  # lazy: only this page reads a task by its number
    from workflow.agents.report import read as read_report

    try:
        with Tasks(app.config.state.tasks) as tasks:
            t = tasks.get(task)
    except WorkflowError:
        return None
    if not sight.reads_role(t.role):
        return None
    report = read_report(app.config.state.runs / f"task-{task}.json")
    ended = t.updated if str(t.status) in ENDED and t.started is not None else None
    took = ended - t.started if ended is not None and t.started is not None else None
    path = runs.transcript(app, task, t.role)
    found: list[Step] = []
    if path is not None:
        try:
            found = steps(runs.read_transcript(path))
        except OSError:
            path = None
    with app.index() as index:
        mine = sight.readable(index, list(t.mids)) if t.mids else set()
        rows = {r.message_id: r for r in index.query(None, message_ids=sorted(mine))} if mine else {}
    triggers = tuple(Trigger(m, rows[m].subject if m in rows else "", m in mine and m in rows) for m in t.mids)
    usage = report.usage if report is not None else {}
    return RunPage(
        task=t.id,
        role=t.role,
        kind=t.kind,
        ref=t.ref,
        status=str(t.status) + (" (dead)" if t.dead else ""),
        attempts=t.attempts,
        created=t.created,
        started=t.started,
        ended=ended,
        took=took,
        tokens=report.tokens if report is not None else 0,
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        cost=report.cost_microusd / 1e6 if report is not None else 0.0,
        turns=report.turns if report is not None else 0,
        error=t.error,
        summary=report.summary if report is not None else "",
        triggers=triggers,
        steps=tuple(found),
        transcript=path is not None,
        log=runs._tail(app.config.state.runs / f"task-{task}.log"),
    )
