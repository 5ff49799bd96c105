"""agentd: wake roles when their trigger mail arrives — one run per batch, never two at once, none lost.

A dumb loop (docs/agentd.md): watchdog events on every watched mailbox's new/ wake a sweep, and a
periodic rescan is the safety net for events inotify drops. The sweep finds each async role's
unread mail whose event is in its ``triggers``, skips what that role already has in a live task
(or gave up on) and threads loop detection stopped, and queues one task per role (more mail
coalesces into it); a message copied to several roles wakes each of them, independently.
Dispatch claims due tasks atomically — at most ``max_concurrent`` running, one per role — and
spawns ``run-role --with-email ROLE`` in its own session; run-role takes the role's lock itself
and enforces the run's timeout, so a run outlives an agentd crash, and the restarted agentd
adopts it (waits for it and reads its result) instead of starting it again; a run that died in its
commit is finished by the next run of its role, which agentd starts for it. Reaping reads the
run's result file: success completes the task and counts token usage; failure retries with
backoff, then dead-letters the task and escalates (never to the failing role itself);
``pause_after`` consecutive failures or a spent daily token budget pause the role. One agentd
runs per mail root (``agentd.lock``); a second SIGINT or SIGTERM stops it at once. Each periodic
rescan also sends what waits in the outbox (mail a run committed while the server would not take it).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from workflow.agentd.decide import Decide
from workflow.agentd.launch import Handle, Launcher
from workflow.agentd.ledger import Ledger, record
from workflow.agentd.scan import MailScan, Meta
from workflow.agentd.tasks import BRIDGE, MAIL, Task, Tasks, TaskStatus
from workflow.agentd.told import Told
from workflow.agents import locks
from workflow.agents.backends import chosen
from workflow.agents.contain import kill_session
from workflow.agents.modelapi import Probe, apis
from workflow.agents.report import EXIT_BUSY, RESULT_ENV
from workflow.agents.report import read as read_report
from workflow.agents.txn import Run, run_dir
from workflow.app import App
from workflow.core import diskfull, hosts
from workflow.core.backendkinds import kind
from workflow.core.config import AgentdConfig
from workflow.core.errors import ConfigError, WorkflowError
from workflow.delivery import outbox
from workflow.delivery.transport import make_transport
from workflow.mail.index import Index

FULL_WAIT = 5.0  # seconds between looks when the disk is full
DECIDE_EVERY = 1.0  # seconds between looks for people's decisions when nothing wakes agentd


class Running(NamedTuple):
    task: Task
    proc: Handle | None  # None: adopted from an agentd that crashed (watched by its lock)
    started: float
    result_file: Path
    lock: locks.LockInfo | None = None

    def exit_code(self) -> int | None:
        """The run's exit status once it ended (an adopted run's, from its result file); None while it runs."""
        if self.proc is not None:
            return self.proc.poll()
        if self.lock is not None and locks.holder_alive(self.lock) is not False:
            return None
        report = read_report(self.result_file)
        return -1 if report is None else report.exit_code  # -1: it ended without a word (killed)

    def kill(self, grace: float = 5.0) -> None:
        """SIGTERM (run-role rolls its run back and kills its agent), then SIGKILL after ``grace``."""
        pid = self.proc.pid if self.proc is not None else self.lock.pid if self.lock is not None else 0
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            if pid <= 0:
                return
            try:
                os.killpg(pid, sig)  # run-role leads its own session; its agent is contained under it
            except (ProcessLookupError, PermissionError):
                pass
            if sig == signal.SIGKILL:  # and what it started in groups of their own (its git commands)
                kill_session(pid)
            end = time.monotonic() + wait
            while time.monotonic() < end:
                if self.proc is not None and self.proc.poll() is not None:
                    return
                if self.proc is None and not locks.pid_alive(pid):
                    return
                time.sleep(0.02)


class _StopRace(logging.Filter):
    """watchdog logs an ERROR when its inotify thread reads one last event while it stops: a race
    of a normal shutdown, not a failure (it is dropped; nothing else from watchdog is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


def quiet_watchdog() -> None:
    log = logging.getLogger("watchdog.observers.inotify")
    if not any(isinstance(f, _StopRace) for f in log.filters):
        log.addFilter(_StopRace())


def preload(app: App, roles: list[str], override: str = "") -> list[str]:
    """What the backends of ``roles`` import, for agentd's fork server to import once (``Kind.preload``)."""
    out: list[str] = []
    for name in roles:
        role = app.roster.roles.get(name)
        if role is None:
            continue  # a panel: its members' runs import what theirs need
        k = kind(chosen(app.config, name, role.backend, override or None))
        out += [m for m in (k.preload if k is not None else ()) if m not in out]
    return out


class Agentd:
    """The daemon; ``run`` until ``stop`` is set."""

    def __init__(self, app: App, opts: AgentdConfig, echo: Callable[[str], None]) -> None:
        self.app, self.opts, self.echo = app, opts, echo
        self.tasks = Tasks(app.config.state.tasks)
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.hard = threading.Event()  # a second stop signal: kill the runs now, skip the grace period
        self.running: dict[int, Running] = {}
        self.runs_dir = app.config.state.runs
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = app.config.state.agentd_log
        self.idle: list[str] = []  # roles that cannot run until a backend is chosen
        self.roles = self._roles()
        self.decide = Decide(app, self.tasks, self.log, self.watch_of, self.idle)
        self.told = Told(app, self.tasks, self.log)
        self.ledger = Ledger(app, opts, self.tasks, self.log)
        self.observer: Any = None
        self.probes: dict[str, tuple[Probe, list[str]]] = {}
        self.scan = MailScan(app.maildirs)
        # runs forked from a warm fork server (launch), started now, before any thread of ours
        self.launcher = Launcher(
            protected=(app.config.project_dir, app.config.mail_root), preload=preload(app, self.roles, opts.backend)
        )

    def _roles(self) -> list[str]:
        """Async roles with triggers, and panels (a review panel wakes on review-requests, a
        writing panel's primary on clarification-requests and questions)."""
        roster, cfg = self.app.roster, self.app.config
        here = hosts.chosen(cfg.file, cfg.hosts, cfg.this_host)  # each host's agentd runs the roles that live on it
        wanted = [
            name
            for name in self.opts.roles or (*roster.roles, *(p.name for p in cfg.panels))
            if not here or roster.host_of(name) == here
        ]
        out = []
        self.watch_of: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for name in wanted:
            panel = self.app.config.panel(name)
            if panel is not None:
                if panel.kind == "review":
                    self.watch_of[name] = (panel.mailboxes, ("review-request",))
                elif panel.primary:
                    self.watch_of[name] = ((panel.mailbox(panel.primary),), ("clarification-request", "question"))
                else:
                    continue
                out.append(name)
                continue
            if name not in roster.roles:
                raise ConfigError(
                    f"{self.app.config.file}: [agentd] roles: unknown role or panel {name!r}{roster.suggest_names(name)}"
                )
            role = roster.roles[name]
            if role.mode == "async" and role.triggers:
                try:
                    chosen(self.app.config, name, role.backend, self.opts.backend or None)  # checked now, not per run
                except ConfigError:
                    self.idle.append(name)  # people are served and their decisions applied meanwhile
                    continue
                self.watch_of[name] = (roster.mailboxes_of(name), role.triggers)
                out.append(name)
        human = self.opts.escalate_human
        if human and (human not in roster.roles or roster.roles[human].mode != "human"):
            raise ConfigError(f"{self.app.config.file}: [agentd] escalate_human: expected a human role, got {human!r}")
        return out

    def request_stop(self) -> None:
        """SIGINT/SIGTERM: the first stops taking work (runs get the grace period); the second stops now."""
        if self.stop.is_set():
            self.hard.set()
        self.stop.set()
        self.wake.set()

    # -- logging

    def log(self, event: str, **fields: Any) -> None:
        fields = record(self.log_path, event, fields)
        who = fields.get("role", "")
        tid = f" task {fields['task']}" if "task" in fields else ""
        extra = {k: v for k, v in fields.items() if k not in ("role", "task", "mids")}
        detail = " ".join(f"{k}={v}" for k, v in extra.items())
        self.echo(f"{time.strftime('%H:%M:%S')} {event:<10} {who}{tid} {detail}".rstrip())

    # -- watching

    def watch(self) -> None:
        # lazy: start-up time (watchdog costs ~40 ms); `agentd status` and friends never watch
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        logging.getLogger("watchdog").setLevel(logging.ERROR)  # its shutdown chatter is not ours to show

        wake = self.wake

        class Handler(FileSystemEventHandler):
            def on_created(self, event: FileSystemEvent) -> None:
                wake.set()

            def on_moved(self, event: FileSystemEvent) -> None:
                wake.set()

        quiet_watchdog()
        self.observer = Observer()
        handler = Handler()
        boxes = {box for name in self.roles for box in self.watch_of[name][0]}
        if self.decide.people:  # a person's decision may be sent to any role
            boxes.update(box for name in self.app.roster.roles for box in self.app.roster.mailboxes_of(name))
        for box in sorted(boxes):
            self.app.maildirs.ensure(box)
            self.observer.schedule(handler, str(self.app.maildirs.path(box) / "new"), recursive=False)
        self.observer.start()

    # -- the loop

    def run(self) -> None:
        me = locks.acquire(self.app.config.state.daemon_lock, self.opts.lock_ttl)
        if me is None:
            other = locks.read(self.app.config.state.daemon_lock)
            who = (
                f"pid {other.pid} since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(other.started))}"
                if other
                else "?"
            )
            self.tasks.close()
            raise WorkflowError(f"agentd is already running for {self.app.config.mail_root} ({who}); `agentd status`")
        try:
            self._run()
        finally:
            locks.release(me)

    def _run(self) -> None:
        for t in self.tasks.left_running():
            self.adopt(t)
        for info in locks.scan(self.app.config.state):
            why = locks.stale(info, self.opts.lock_ttl)
            if why:
                info.path.unlink(missing_ok=True)
                self.log("stale-lock", role=info.name, why=why)
        self.watch()
        self.log("started", roles=len(self.roles), rescan=self.opts.rescan, max_concurrent=self.opts.max_concurrent)
        self.ask_apis()
        if self.idle:
            self.log(
                "no-backend",
                roles=",".join(self.idle),
                why=f"these roles cannot run until a backend is chosen ([workflow] backend in {self.app.config.file})",
            )
        last_sweep = last_decide = 0.0
        try:
            woke = True
            full = False
            while not self.stop.is_set():
                now = time.monotonic()
                try:
                    if woke or now - last_sweep >= self.opts.rescan:
                        self.sweep()  # after the clear below: a file that woke us is seen by this sweep
                        if now - last_sweep >= self.opts.rescan:
                            self.flush_outbox()
                            self.finish_crashed()
                        last_sweep = now
                    if woke or now - last_decide >= DECIDE_EVERY:  # the index may lag the file that woke us
                        self.decide_now()
                        last_decide = now
                    self.reap()
                    self.dispatch()
                    if full:
                        logging.getLogger(__name__).warning("there is room on the disk again; runs go on")
                        full = False
                except Exception as e:
                    if not diskfull.is_full(e):
                        raise
                    if not full:  # one line when it fills, not one a second
                        waits = f"runs wait; agentd looks again every {FULL_WAIT:.0f} s"
                        logging.getLogger(__name__).warning("%s", diskfull.line(e, self.app.config.state.root, waits))
                    full = True
                    self.stop.wait(FULL_WAIT)
                    continue
                woke = self.wake.wait(0.1 if self.running else min(1.0, self.opts.rescan))
                self.wake.clear()
        finally:
            self.shutdown()

    def decide_now(self) -> None:
        """Apply the decisions people mailed; a failure is logged and tried again next time."""
        try:
            self.decide.step(lambda: make_transport(self.app.config, self.app.deliverer))
        except Exception as e:  # never let one message stop the daemon (its traceback is in the log)
            logging.getLogger(__name__).exception("applying decisions by mail failed")
            self.log("decide-failed", error=f"{type(e).__name__}: {e}"[:300])
        try:  # whoever asked for the work hears when it reaches done (agentd.told)
            self.told.step(lambda: make_transport(self.app.config, self.app.deliverer), int(time.time()))
        except Exception as e:
            logging.getLogger(__name__).exception("telling requesters failed")
            self.log("told-failed", error=f"{type(e).__name__}: {e}"[:300])

    def flush_outbox(self) -> None:
        """Send what waits in the outbox; say what was sent and what still waits."""
        if not outbox.pending(self.app.config):
            return
        notes: list[str] = []
        sent, left = outbox.flush(self.app.config, make_transport(self.app.config, self.app.deliverer), notes.append)
        self.log("outbox", sent=sent, left=left, notes=notes[:20])

    def finish_crashed(self) -> None:
        """A run killed late in its commit leaves its directory (and a dead lock) with its mail already
        read, so nothing would wake its role again: queue the role, and its next run-role finishes it."""
        taken = self.tasks.taken()
        for name in self.roles:
            run = Run(run_dir(self.app.config.state, name))
            if not run.dir.is_dir():
                continue
            lock = locks.read(self.app.config.state.lock(name))
            if lock is not None and locks.stale(lock, self.opts.lock_ttl) is None:
                continue  # its run-role is at work (or is committing right now)
            mids = run.handed_ids()
            if mids and not any((name, m) in taken for m in mids):
                task, _ = self.tasks.enqueue(name, mids)
                self.log("queued", role=name, task=task.id, mids=mids, why="a crashed run left its directory")

    def sweep(self) -> None:
        """Queue (or coalesce) one task per role with untaken unread trigger mail."""
        taken = self.tasks.taken()
        stopped = self.tasks.stopped()
        index: Index | None = None
        try:
            for name in self.roles:
                boxes, triggers = self.watch_of[name]
                fresh: dict[str, list[str]] = {}  # by the bridge address that asked ("": the role's own mail)
                asks = name in self.app.roster.roles  # a role is asked by a bridge whatever its triggers
                for m in self.scan.unread(boxes):
                    asker = m.sender if asks and self.app.roster.bridge_of(m.sender) else ""
                    if (m.event not in triggers and not asker) or (name, m.mid) in taken or m.root in stopped:
                        continue
                    if index is None:
                        index = self.app.index()
                    if self._loop(index, m, stopped):
                        continue
                    fresh.setdefault(asker, []).append(m.mid)
                for asker, mids in fresh.items():
                    task, created = self.tasks.enqueue(name, mids, kind=BRIDGE if asker else MAIL, ref=asker)
                    taken.update((name, mid) for mid in mids)
                    self.log(
                        "queued" if created else "coalesced",
                        role=name,
                        task=task.id,
                        mids=mids,
                        messages=len(task.mids),
                        **({"asked_by": asker} if asker else {}),
                    )
        finally:
            if index is not None:
                index.close()

    def _loop(self, index: Index, m: Meta, stopped: dict[str, str]) -> bool:
        """Loop detection over the indexed thread (read-only: the index may lag a few ms)."""
        root = m.root
        thread = {r.message_id: r for r in index.by_root(root)}
        reason = ""
        if len(thread) > self.opts.thread_cap:
            reason = f"thread has {len(thread)} messages (cap {self.opts.thread_cap})"
        else:
            since = time.time() - self.opts.repeat_window
            counts: dict[tuple[str, tuple[str, ...], str | None, tuple[str, ...]], int] = {}
            for r in thread.values():
                if r.date >= since:
                    k = (r.sender, r.recipients, r.event, r.artifacts)
                    counts[k] = counts.get(k, 0) + 1
            worst = max(counts.items(), key=lambda kv: kv[1], default=None)
            if worst and worst[1] >= self.opts.repeat_limit:
                (frm, to, ev, _), n = worst
                reason = (
                    f"{ev} from {frm.split('@')[0]} to {', '.join(t.split('@')[0] for t in to)} "
                    f"repeated {n} times within {self.opts.repeat_window:.0f}s"
                )
        if not reason:
            return False
        stopped[root] = reason
        if self.tasks.stop_thread(root, reason):
            self.log("loop", role="", thread=root, why=reason)
            self.ledger.escalate(None, f"loop detected, thread {root} no longer wakes anyone: {reason}", m.artifacts)
        return True

    def ask_apis(self) -> None:
        """Ask each model API the roles' backends use whether it answers (``agents.modelapi``)."""
        if not self.opts.model_wait:
            return
        users: dict[str, list[str]] = {}
        for name in self.roles:
            panel = self.app.config.panel(name)
            if panel is not None:
                backends = [m.backend for m in panel.members]
            else:
                backends = [chosen(self.app.config, name, self.app.roster.roles[name].backend, self.opts.backend)]
            for url in apis(backends, os.environ):
                users.setdefault(url, []).append(name)
        for url, names in users.items():
            probe = Probe(url, self.opts.model_progress, self.opts.model_wait, self.echo)
            self.probes[url] = (probe.begin(), names)

    def heed_apis(self) -> bool:
        """Whether runs may start: no model API is still being waited for. One that gave up pauses
        the roles that use it, with its line."""
        for url, (probe, names) in list(self.probes.items()):
            if probe.waiting:
                return False
            del self.probes[url]
            if probe.failed:
                self.echo(probe.failed)
                for name in names:
                    self.tasks.pause(name, probe.failed)
                    self.log("paused", role=name, why=probe.failed)
        return True

    def dispatch(self) -> None:
        if self.stop.is_set() or not self.heed_apis():
            return
        while True:
            t = self.tasks.claim(self.opts.max_concurrent, settle=self.opts.settle, settle_max=self.opts.settle_max)
            if t is None:
                return
            lock = locks.read(self.app.config.state.lock(t.role))
            if lock is not None and locks.stale(lock, self.opts.lock_ttl) is None:
                # A run from before a restart (or a human's) still holds the role: wait for it.
                self.tasks.put_back(t.id, "role locked by a live run", time.time() + 1.0)
                continue
            if not self._still_unread(t) and not run_dir(self.app.config.state, t.role).is_dir():
                self.tasks.finish(t.id, TaskStatus.COMPLETED, "handled by an earlier run")
                self.log("skipped", role=t.role, task=t.id, why="its mail was handled by an earlier run")
                continue
            self.spawn(t)

    def _still_unread(self, t: Task) -> bool:
        boxes = self.watch_of[t.role][0] if t.role in self.watch_of else self.app.roster.mailboxes_of(t.role)
        unread = {m.mid for m in self.scan.unread(boxes)}
        return any(m in unread for m in t.mids)

    def spawn(self, t: Task) -> None:
        cfg = self.app.config
        result = self.runs_dir / f"task-{t.id}.json"
        result.unlink(missing_ok=True)
        argv: list[str] = []
        if cfg.path is not None:
            argv += ["--config", str(cfg.path)]
        argv += ["--mail-root", str(cfg.mail_root), "run-role", "--with-email"]
        if self.opts.backend:
            argv += ["--backend", self.opts.backend]
        for mid in t.mids if t.kind == BRIDGE else ():  # one outside conversation's mail, and nothing else
            argv += ["--message", mid]
        argv.append(t.role)
        env = {**os.environ, RESULT_ENV: str(result), "WORKFLOW_TASK": str(t.id)}
        log = self.runs_dir / f"task-{t.id}.log"
        proc = self.launcher.start(argv, cfg.project_dir, env, log, self.opts.nice)
        now = time.time()
        self.tasks.set_pid(t.id, proc.pid)
        self.running[t.id] = Running(t, proc, now, result)
        self.log("started", role=t.role, task=t.id, pid=proc.pid, mids=list(t.mids), attempt=t.attempts)

    def adopt(self, t: Task) -> None:
        """A task the last agentd left running: its run still holds the role's lock → wait for it and
        read its result; otherwise the run is gone → queue the task again (the attempt not counted)."""
        lock = locks.read(self.app.config.state.lock(t.role))
        result = self.runs_dir / f"task-{t.id}.json"
        if t.pid and locks.pid_alive(t.pid) and not result.exists():
            # the run-role the last agentd spawned is still at work (maybe not yet holding the lock)
            watch = locks.holder(self.app.config.state.lock(t.role), t.pid)
            self.running[t.id] = Running(t, None, t.started or time.time(), result, watch)
            self.log("adopted", role=t.role, task=t.id, pid=t.pid)
        elif lock is not None and locks.holder_alive(lock) and locks.stale(lock, self.opts.lock_ttl) is None:
            self.running[t.id] = Running(t, None, t.started or time.time(), result, lock)
            self.log("adopted", role=t.role, task=t.id, pid=lock.pid)
        elif result.exists():  # it ended while no agentd watched: its result stands
            self.running[t.id] = Running(t, None, t.started or time.time(), result, lock)
            self.log("adopted", role=t.role, task=t.id, pid=lock.pid if lock else 0, ended=True)
        else:
            self.tasks.put_back(t.id, "agentd stopped while it ran; its run is gone", time.time())
            self.log("recovered", role=t.role, task=t.id, was="running")

    def reap(self) -> None:
        for tid, run in list(self.running.items()):
            code = run.exit_code()
            limit = self.opts.role_timeouts.get(run.task.role, self.opts.timeout)
            # run-role ends its own run at the timeout; this is the backstop for a wedged run-role
            if code is None and time.time() - run.started > limit + self.opts.grace + 5:
                run.kill()
                del self.running[tid]
                self.ledger.failed(
                    run.task, f"timed out after {limit:.0f}s and did not stop; run-role and its agent were killed"
                )
                continue
            if code is None:
                continue
            del self.running[tid]
            if run.proc is None and code == -1:  # an adopted run that left no result: maybe not ours
                self._unknown_end(run.task)
                continue
            self._ended(run, code)

    def _unknown_end(self, t: Task) -> None:
        if self._still_unread(t):
            self.tasks.put_back(t.id, "the run that held the role ended without a result", time.time())
            self.log("requeued", role=t.role, task=t.id, why="its run ended without a result")
        else:
            self.tasks.finish(t.id, TaskStatus.COMPLETED, "handled by the run that held the role")
            self.log("completed", role=t.role, task=t.id, ran=True, adopted=True)

    def _ended(self, run: Running, code: int) -> None:
        t = run.task
        report = read_report(run.result_file)
        if code == EXIT_BUSY:
            self.tasks.put_back(t.id, "role busy", time.time() + 1.0)
            self.log("busy", role=t.role, task=t.id, holder=report.busy if report else "")
            return
        if code != 0 or report is None:
            log_tail = _tail(self.runs_dir / f"task-{t.id}.log")
            error = report.error if report is not None and report.error else ""
            self.ledger.failed(t, error or f"run-role exited with status {code}: {log_tail}", report)
            return
        self.ledger.ended(t, report, time.time() - run.started)

    def shutdown(self) -> None:
        """Stop taking work, let runs finish within the grace period, re-queue what is left."""
        if self.observer is not None:
            self.observer.stop()
            self.observer.join()
        end = time.monotonic() + self.opts.grace
        if self.running:
            self.log("stopping", running=len(self.running), grace=0 if self.hard.is_set() else self.opts.grace)
            if not self.hard.is_set():  # say what is waited for, and how long, rather than wait in silence
                runs = ", ".join(f"{r.task.role} (task {tid})" for tid, r in self.running.items())
                self.echo(
                    f"waiting up to {self.opts.grace:g} s ([agentd] grace) for {len(self.running)} run(s) to "
                    f"finish: {runs}; then they are stopped and their mail is tried again later. "
                    "Ctrl-C again stops them now"
                )
        while self.running and time.monotonic() < end and not self.hard.is_set():
            self.reap()
            self.hard.wait(0.05)
        for tid, run in list(self.running.items()):
            run.kill(0.5 if self.hard.is_set() else 5.0)  # its run rolls back: its mail stays unread, tried later
            self.tasks.put_back(tid, "agentd stopped before the run ended", time.time())
            self.log("requeued", role=run.task.role, task=tid)
        self.running.clear()
        self.log("stopped")
        self.tasks.close()


def _tail(path: Path, n: int = 400) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:].strip().replace("\n", " / ")
    except OSError:
        return ""
