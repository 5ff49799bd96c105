"""Runs: what the runs page shows a viewer — agentd's runs with their duration and age, tokens and
cost, and for the runs of a role the viewer reads (``Sight.reads_role``: the owner reads all) the
log's tail, the error, and a link to the run's transcript; with several hosts, where each role lives.

A run of another role is listed (that it ran is the team's, as the board's cards are) with its
status and numbers only: no log, no error, no reference — they quote that role's mail. A run's
transcript is what its agent CLI kept in the role's own CLI state (``StateDir.cli``), found by the
session the run reported, or a ``task-N.transcript*`` file in the runs folder; a regular file
inside those folders only (a symlink an agent planted there is not followed).
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import NamedTuple

from workflow.agentd.status import DaemonStatus, status
from workflow.app import App
from workflow.artifacts.board import age
from workflow.core.errors import RosterError, WorkflowError
from workflow.policy.visibility import Sight

LOG_TAIL = 4000  # characters of a run's log shown
TRANSCRIPT_MAX = 8 << 20  # bytes of a transcript served at most (its end)
SESSION = re.compile(r"[A-Za-z0-9_-]{6,128}")  # a session id as the agent CLIs make them


class RunView(NamedTuple):
    task: int
    role: str
    kind: str
    ref: str
    status: str  # running | queued | failed | dead | done
    took: int  # seconds it ran (so far, while running)
    age: int  # seconds since it ended (started, while running; until it may start, while queued)
    tokens: int
    cost: float
    error: str
    log: str  # its log's tail ("" when the viewer may not read the role's mail)
    readable: bool  # the viewer reads the role's mail: log, error and transcript shown
    transcript: bool  # a transcript is kept (and the viewer may open it)


class Budget(NamedTuple):
    role: str
    tokens: int
    limit: int  # 0: none
    cost: float
    paused: str  # why, when paused ("paused" alone for a role the viewer does not read)


class HostView(NamedTuple):
    name: str
    address: str
    here: bool  # the host this cockpit runs on
    roles: tuple[str, ...]  # the roles (and panel members) that live on it


class Runs(NamedTuple):
    daemon: str  # "agentd pid N since …", or that none runs
    runs: tuple[RunView, ...]
    budgets: tuple[Budget, ...]
    hosts: tuple[HostView, ...] = ()  # where each role lives, when the team has several hosts


def hosts(app: App) -> tuple[HostView, ...]:
    """Each of ``[hosts]`` and the roles that live on it (what ``workflow roster`` says too)."""
    ros, cfg = app.roster, app.config
    names = sorted({*(r for r in ros.roles if ros.roles[r].takes_mail), *ros.members})
    return tuple(
        HostView(h.name, h.address, h.name == cfg.this_host, tuple(n for n in names if ros.host_of(n) == h.name))
        for h in cfg.hosts
    )


def runs(app: App, sight: Sight) -> Runs:
    """What ``agentd status`` shows, as ``sight`` may see it: every run, and the logs of its roles."""
    s: DaemonStatus = status(app)
    now = time.time()
    out: list[RunView] = []
    for r in s.running:
        out.append(_run(app, sight, r.task, r.role, r.kind, r.ref, "running", r.age, r.age, ""))
    for q in s.queued:
        out.append(_run(app, sight, q.task, q.role, "mail", "", "queued", 0, q.due_in, q.error))
    for f in s.recent_failures:
        state = "dead" if f.dead else "failed"
        out.append(_run(app, sight, f.task, f.role, f.kind, f.ref, state, f.took, f.ago, f.error))
    for d in s.recent:
        out.append(_run(app, sight, d.task, d.role, d.kind, d.ref, "done", d.took, d.ago, ""))
    opts = app.config.agentd
    names = sorted({*s.tokens_today, *s.cost_today, *s.paused})
    budgets = tuple(
        Budget(
            n,
            s.tokens_today.get(n, 0),
            int(opts.role_budgets.get(n, opts.daily_tokens)),
            s.cost_today.get(n, 0.0),
            (s.paused.get(n, "") if sight.reads_role(n) else "paused" if s.paused.get(n) else ""),
        )
        for n in names
    )
    daemon = (
        f"agentd pid {s.daemon.pid} on {s.daemon.host}, up {age(int(s.daemon.since), now).removesuffix(' ago')}"
        if s.daemon
        else "no agentd runs for this mail root (`workflow up` or `agentd run` starts one)"
    )
    return Runs(daemon, tuple(out), budgets, hosts(app))


def _run(
    app: App, sight: Sight, task: int, role: str, kind: str, ref: str, state: str, took: int, ago: int, error: str
) -> RunView:
    from workflow.agents.report import read as read_report  # lazy: only the runs page reads reports

    runs_dir = app.config.state.runs
    report = read_report(runs_dir / f"task-{task}.json")
    tokens = report.tokens if report is not None else 0
    cost = report.cost_microusd / 1e6 if report is not None else 0.0
    if not sight.reads_role(role):
        return RunView(task, role, kind, "", state, took, ago, tokens, cost, "", "", False, False)
    log = _tail(runs_dir / f"task-{task}.log")
    kept = transcript(app, task, role) is not None
    return RunView(task, role, kind, ref, state, took, ago, tokens, cost, error, log, True, kept)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - LOG_TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def transcript(app: App, task: int, role: str) -> Path | None:
    """The transcript run ``task`` of ``role`` left, or None: ``runs/task-N.transcript*``, else the
    file named by its session in the role's (a panel's: each member's) CLI state."""
    from workflow.agents.report import read as read_report  # lazy: as above

    state = app.config.state
    for p in sorted(state.runs.glob(f"task-{task}.transcript*")):
        if _regular(p, state.runs):
            return p
    report = read_report(state.runs / f"task-{task}.json")
    session = report.session if report is not None else ""
    if not SESSION.fullmatch(session):
        return None
    try:
        names = app.roster.mailboxes_of(role)
    except RosterError:  # a role gone from the roster: its own CLI state still has it
        names = ()
    for name in dict.fromkeys((role, *names)):
        home = state.cli(name)
        if home.is_dir():
            for p in sorted(home.glob(f"**/*{session}*.json*")):
                if _regular(p, home):
                    return p
    return None


def _regular(path: Path, inside: Path) -> bool:
    """A regular file (not a symlink) whose real path is inside ``inside``."""
    try:
        st = os.lstat(path)
        return stat.S_ISREG(st.st_mode) and path.resolve().is_relative_to(inside.resolve())
    except OSError:
        return False


def read_transcript(path: Path) -> str:
    """A transcript's text (its end, when it is very long), read without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - TRANSCRIPT_MAX))
        return f.read().decode("utf-8", "replace")


def transcript_for(app: App, sight: Sight, task: int) -> tuple[int, str]:
    """(HTTP status, text) of ``/transcript?task=N`` for ``sight``: the transcript, or why not."""
    from workflow.agentd.tasks import Tasks  # lazy: only this page reads a task by its number

    try:
        with Tasks(app.config.state.tasks) as tasks:
            found = tasks.get(task)
    except WorkflowError:
        return 404, f"no run task {task} (/runs lists the runs)"
    if not sight.reads_role(found.role):  # the same answer as for no such run: nothing says whose it is
        return 404, f"no run task {task} (/runs lists the runs)"
    path = transcript(app, task, found.role)
    if path is None:
        return 404, f"run task {task} of {found.role} left no transcript"
    try:
        return 200, read_transcript(path)
    except OSError as e:
        return 404, f"the transcript of task {task} cannot be read: {e}"
