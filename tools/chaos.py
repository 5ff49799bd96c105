"""Chaos: the randomized fault harness — seeded schedules of mail and faults against the real stack.

A schedule (``schedule(seed, index)``: the same seed and index always give the same schedule)
mixes single mails, bursts for one role and messages copied to 2–4 roles. Every (role, message)
has a plan for its attempts, carried out by the chaos agent (``tools/chaos_agent.py``, the
command backend's agent, run by path): succeed, fail, hang past the timeout, send and then fail, or leave a
``setsid`` child behind. Faults land at random moments: SIGKILL or SIGTERM to agentd (started
again after a pause) and SIGKILL to a run-role. ``play`` runs a schedule in a scratch project
against a real ``workflow smtpd``, a real ``workflow agentd run`` and the real ``run-role``
processes agentd spawns and waits until it settles; ``check`` (``tools.chaos_check``)
judges what happened against the promises of agentd and run-role.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tools.chaos_record import answered_pairs
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.agents import locks
from workflow.app import App
from workflow.artifacts.gitcmd import run_git
from workflow.bridges.sections import SECTIONS
from workflow.core.config import load_config
from workflow.delivery.credentials import client_credential
from workflow.delivery.transport import LocalSMTP, login
from workflow.mail.message import Draft, build
from workflow.ops.scaffold import init

ROLES = ("spec-writer", "skeleton-writer", "test-writer", "implementation-writer")
# (plan of one (role, message): a behaviour per attempt, the last repeating), weight
PLANS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("ok",), 40),
    (("fail", "ok"), 12),
    (("send-then-fail", "ok"), 12),
    (("fork",), 10),
    (("fail", "send-then-fail", "ok"), 6),
    (("hang", "ok"), 5),
    (("send-then-fail", "fork"), 5),
)
WINDOW = 3.0  # seconds over which a schedule's mail and faults land
TIMEOUT = 10.0  # [agentd] timeout: a hanging agent is killed after this long
MAX_CONCURRENT = 2
CONFIG = """\
# A scratch project of the chaos harness (tools/chaos.py).
[workflow]
domain = "workflow.local"
mail_root = "mail"

[smtp]
port = {port}

[guardrails]
state_matches = false

[agentd]
roles = {roles}
backend = "command"
rescan = 2
timeout = {timeout}
grace = 1
max_concurrent = {max_concurrent}
max_attempts = 40
retry_backoff = 0.2
pause_after = 1000
repeat_limit = 1000
settle = 0.1
settle_max = 1

[backends.command]
argv = {argv}
contain = "{contain}"

[runs]
sandbox = "{sandbox}"
env = ["CHAOS_DIR"]
"""


class Mail(NamedTuple):
    at: float  # seconds after the schedule starts
    mid: str
    to: tuple[str, ...]
    plans: tuple[tuple[str, ...], ...]  # one per recipient
    shape: str  # single | copies | burst


class Fault(NamedTuple):
    at: float
    kind: str  # kill-agentd | stop-agentd | kill-run
    pause: float  # how long agentd stays down


class Schedule(NamedTuple):
    seed: int
    number: int
    mails: tuple[Mail, ...]
    faults: tuple[Fault, ...]

    @property
    def tag(self) -> str:
        return f"{self.seed}-{self.number}"

    def plans(self) -> dict[str, list[str]]:
        return {f"{r} {m.mid}": list(p) for m in self.mails for r, p in zip(m.to, m.plans, strict=True)}

    def pairs(self) -> set[tuple[str, str]]:
        """Every (role, Message-ID) that must wake its role: each mail is a question, in every role's triggers."""
        return {(r, m.mid) for m in self.mails for r in m.to}

    def describe(self) -> str:
        shapes = [m.shape for m in self.mails]
        faults = ", ".join(f"{f.kind}@{f.at:.1f}s" for f in self.faults) or "no faults"
        return (
            f"{len(self.mails)} mails ({shapes.count('single')} single, {shapes.count('copies')} copied, "
            f"{shapes.count('burst')} in bursts), {len(self.pairs())} (role, message) pairs; {faults}"
        )

    def digest(self) -> str:
        """A short fingerprint: the same for the same seed and index, run after run."""
        return hashlib.sha256(repr(tuple(self)).encode()).hexdigest()[:12]


def _plan(rng: random.Random) -> tuple[str, ...]:
    return rng.choices([p for p, _ in PLANS], weights=[w for _, w in PLANS])[0]


def schedule(seed: int, index: int) -> Schedule:
    """The ``index``-th schedule of ``seed``."""
    rng = random.Random(f"workflow chaos {seed} {index}")
    mails: list[Mail] = []

    def mid() -> str:
        return f"<chaos-{seed}-{index}-{len(mails)}@workflow.local>"

    for _ in range(rng.randint(2, 5)):
        at = round(rng.uniform(0, WINDOW), 3)
        shape = rng.choices(("single", "copies", "burst"), weights=(4, 4, 2))[0]
        if shape == "copies":
            to = tuple(rng.sample(ROLES, rng.randint(2, 4)))
            mails.append(Mail(at, mid(), to, tuple(_plan(rng) for _ in to), shape))
        elif shape == "burst":
            role = rng.choice(ROLES)
            for _ in range(rng.randint(3, 6)):
                mails.append(Mail(at, mid(), (role,), (_plan(rng),), shape))
                at = round(at + rng.uniform(0.01, 0.06), 3)
        else:
            mails.append(Mail(at, mid(), (rng.choice(ROLES),), (_plan(rng),), shape))
    faults = [
        Fault(
            round(rng.uniform(0.3, WINDOW + 2), 3),
            rng.choices(("kill-agentd", "stop-agentd", "kill-run"), weights=(3, 1, 4))[0],
            round(rng.uniform(0.05, 1.5), 3),
        )
        for _ in range(rng.choices((0, 1, 2, 3), weights=(2, 4, 3, 1))[0])
    ]
    return Schedule(seed, index, tuple(sorted(mails)), tuple(sorted(faults)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Killed(NamedTuple):
    """A run-role the harness killed, and how far its run had got (run.json's state, read after)."""

    pid: int
    role: str
    state: str  # open | committing | rolling-back | gone (its run had ended)


class Played(NamedTuple):
    """What happened when a schedule was played: for ``check``."""

    schedule: Schedule
    project: Path
    chaos: Path
    settled: bool
    waited: float
    killed: tuple[Killed, ...]
    agentd_kills: int
    agentd_stops: int
    kill_misses: int  # kill-run faults that found no run going
    problems: tuple[str, ...]  # what went wrong in the harness itself


class Stack:
    """A real ``workflow smtpd`` and ``workflow agentd run`` in a project; agentd can be killed and restarted."""

    def __init__(self, project: Path, port: int, env: dict[str, str]) -> None:
        self.project, self.port, self.env = project, port, env
        self.out = open(project / "stack.log", "ab")  # closed in stop()
        self.smtpd = self._spawn("smtpd")
        self.agentd: subprocess.Popen[bytes] | None = None
        end = time.monotonic() + 30
        while True:
            try:
                smtplib.SMTP("127.0.0.1", port, timeout=5).quit()
                break
            except OSError:
                if time.monotonic() > end or self.smtpd.poll() is not None:
                    raise RuntimeError(f"workflow smtpd did not start; see {project / 'stack.log'}") from None
                time.sleep(0.05)
        self.start_agentd()

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        # killed with the harness, however it ends (their runs are contained and time out on their own)
        reaper = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        return subprocess.Popen(
            [*reaper, sys.executable, "-m", "workflow", *args],
            cwd=self.project,
            env=self.env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def start_agentd(self) -> None:
        self.agentd = self._spawn("agentd", "run")

    def signal_agentd(self, sig: int, wait: float) -> None:
        if self.agentd is None:
            return
        self.agentd.send_signal(sig)
        try:
            self.agentd.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.agentd.kill()
            self.agentd.wait()
        self.agentd = None

    def agentd_exited(self) -> int | None:
        return self.agentd.poll() if self.agentd is not None else None

    def stop(self) -> None:
        self.signal_agentd(signal.SIGTERM, 30)
        self.smtpd.send_signal(signal.SIGTERM)
        try:
            self.smtpd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.smtpd.kill()
            self.smtpd.wait()
        self.out.close()


def setup(base: Path, s: Schedule, port: int, contain: str = "auto") -> tuple[Path, Path]:
    """A scratch project for one schedule, and its chaos directory (settings and plans for the agent)."""
    project = base / f"schedule-{s.number:04d}"
    project.mkdir(parents=True)
    argv = [sys.executable, str(Path(__file__).with_name("chaos_agent.py"))]  # by path: tools/ is not installed
    (project / "workflow.toml").write_text(
        CONFIG.format(
            port=port,
            roles=json.dumps(list(ROLES)),
            timeout=TIMEOUT,
            max_concurrent=MAX_CONCURRENT,
            argv=json.dumps(argv),
            contain=contain,
            sandbox="bwrap" if contain in ("auto", "bwrap") else "none",
        ),
        encoding="utf-8",
    )
    (project / ".gitignore").write_text("mail/\nchaos/\nstack.log\n", encoding="utf-8")
    init(project)
    for key, value in (("user.name", "chaos"), ("user.email", "chaos@workflow.local")):
        run_git(["config", key, value], project)
    (project / "specs" / "proposed" / "chaos.md").write_text("# Chaos\n", encoding="utf-8")
    chaos = project / "chaos"
    chaos.mkdir()
    (chaos / "settings.json").write_text(json.dumps({"max_concurrent": MAX_CONCURRENT, "tag": s.tag}))
    (chaos / "plans.json").write_text(json.dumps(s.plans()))
    return project, chaos


def question(m: Mail) -> bytes:
    return build(
        Draft(
            sender="coordinator@workflow.local",
            to=[f"{r}@workflow.local" for r in m.to],
            subject=f"[QUESTION] chaos {m.mid}",
            body="A question of the chaos harness: answer it once.\n",
            message_id=m.mid,
            event="question",
            state="proposed",
            artifacts=("specs/*/chaos.md",),
        )
    )


def live_runs(app: App) -> list[locks.LockInfo]:
    """The role locks held by a live run-role (checked by its command line, not only its pid)."""
    out = []
    for info in locks.scan(app.config.state):
        try:
            cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"run-role" in cmdline and locks.holder_alive(info):
            out.append(info)
    return sorted(out, key=lambda i: i.name)


def run_state(app: App, role: str) -> str:
    try:
        info = json.loads((app.config.state.runs / f"{role}.run" / "run.json").read_text())
        return str(info.get("state", "open"))
    except (OSError, ValueError):
        return "gone"


def settled(app: App, answered: Callable[[], bool]) -> bool:
    """Every pair answered, no task queued or running, no role lock, no run directory."""
    if not answered():
        return False
    with Tasks(app.config.state.tasks) as tasks:
        if tasks.list((TaskStatus.QUEUED, TaskStatus.PENDING, TaskStatus.WAITING, TaskStatus.RUNNING)):
            return False
    state = app.config.state
    return not locks.scan(state) and not (state.runs.is_dir() and any(state.runs.glob("*.run")))


def play(
    base: Path, s: Schedule, *, patience: float = 90.0, contain: str = "auto", stop: threading.Event | None = None
) -> Played:
    """Play one schedule in a scratch project under ``base`` and wait (at most ``patience`` s) for it
    to settle; ``contain`` is the agents' containment (``none`` shows what the harness catches
    without it). Setting ``stop`` ends it early: the stack is stopped and KeyboardInterrupt raised."""
    stop = stop or threading.Event()

    def sleep(seconds: float) -> None:
        if stop.wait(max(0.0, seconds)):
            raise KeyboardInterrupt

    port = free_port()
    project, chaos = setup(base, s, port, contain)
    app = App(load_config(project / "workflow.toml", env={}, plugins=SECTIONS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    env["CHAOS_DIR"] = str(chaos)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    rng = random.Random(f"workflow chaos faults {s.seed} {s.number}")  # which run a kill-run hits
    stack = Stack(project, port, env)
    killed: list[Killed] = []
    problems: list[str] = []
    agentd_kills = agentd_stops = misses = 0
    events: list[tuple[float, int, Mail | Fault]] = [(m.at, 0, m) for m in s.mails] + [(f.at, 1, f) for f in s.faults]
    restart_at: float | None = None
    t0 = time.monotonic()
    try:
        client = LocalSMTP(str(app.config.state.socket), timeout=30)
        credential = client_credential(mail_root=app.config.mail_root)
        login(client, credential.login, credential.secret)
        for at, _, ev in sorted(events, key=lambda e: (e[0], e[1])):
            while True:
                now = time.monotonic() - t0
                if restart_at is not None and restart_at <= min(now, at):
                    stack.start_agentd()
                    restart_at = None
                if now >= at:
                    break
                sleep(min(at - now, 0.01))
            if isinstance(ev, Mail):
                client.sendmail("coordinator@workflow.local", [f"{r}@workflow.local" for r in ev.to], question(ev))
            elif ev.kind == "kill-run":
                # the first run going within 2 s, a random moment into it
                wait_end = time.monotonic() + 2.0
                while not (runs := live_runs(app)) and time.monotonic() < wait_end:
                    sleep(0.02)
                sleep(rng.uniform(0, 0.8))
                runs = live_runs(app)
                if not runs:
                    misses += 1
                    continue
                victim = rng.choice(runs)
                try:
                    os.kill(victim.pid, signal.SIGKILL)
                except ProcessLookupError:
                    misses += 1
                    continue
                _wait_gone(victim.pid)
                killed.append(Killed(victim.pid, victim.name, run_state(app, victim.name)))
            elif stack.agentd is not None:
                if ev.kind == "kill-agentd":
                    stack.signal_agentd(signal.SIGKILL, 10)
                    agentd_kills += 1
                else:
                    stack.signal_agentd(signal.SIGTERM, 30)
                    agentd_stops += 1
                restart_at = time.monotonic() - t0 + ev.pause
        client.quit()
        if restart_at is not None:
            sleep(restart_at - (time.monotonic() - t0))
            stack.start_agentd()
        start = time.monotonic()
        end = start + patience
        ok = False
        while time.monotonic() < end:
            code = stack.agentd_exited()
            if code is not None:
                problems.append(f"agentd exited by itself with status {code}")
                stack.start_agentd()
            if settled(app, lambda: answered_pairs(project) >= s.pairs()):
                sleep(1.0)  # anything doubled shows up now
                ok = settled(app, lambda: answered_pairs(project) >= s.pairs())
                if ok:
                    break
            sleep(0.2)
        waited = time.monotonic() - start
    finally:
        stack.stop()
    return Played(s, project, chaos, ok, waited, tuple(killed), agentd_kills, agentd_stops, misses, tuple(problems))


def _wait_gone(pid: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while locks.pid_alive(pid) and time.monotonic() < end:
        time.sleep(0.005)
