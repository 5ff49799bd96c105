"""agentd: wake roles when their trigger mail arrives — one run per batch, never two at once, none lost.

A dumb loop (docs/agentd.md): watchdog events on every watched mailbox's new/ wake a sweep, and a
periodic rescan is the safety net for events inotify drops. The sweep finds each async role's
unread mail whose event is in its ``triggers``, skips mail already in a live task (or given up
on) and threads loop detection stopped, and queues one task per role (more mail coalesces into
it). Dispatch claims due tasks atomically — at most ``max_concurrent`` running, one per role —
and spawns ``run-role --with-email ROLE`` in its own process group; run-role takes the role's
lock file itself (pid, host, start), so a run outlives an agentd crash and is never doubled.
Reaping reads the run's result file: success completes the task and counts token usage;
failure retries with backoff, then dead-letters the task and escalates to the coordinator;
``pause_after`` consecutive failures or a spent daily token budget pause the role.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from workflow.agentd.scan import MailScan, Meta
from workflow.agentd.tasks import Task, Tasks, TaskStatus
from workflow.agents import locks
from workflow.app import App
from workflow.core.config import AgentdConfig
from workflow.core.errors import ConfigError, WorkflowError
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.mail.index import Index

LOG_MIDS = 50  # Message-IDs listed per log line (the rest are counted)


class Running(NamedTuple):
    task: Task
    proc: subprocess.Popen[bytes]
    started: float
    result_file: Path


class Agentd:
    """The daemon; ``run`` until ``stop`` is set."""

    def __init__(self, app: App, opts: AgentdConfig, echo: Callable[[str], None]) -> None:
        self.app, self.opts, self.echo = app, opts, echo
        self.tasks = Tasks(app.config.state.tasks)
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.running: dict[int, Running] = {}
        self.runs_dir = app.config.state.runs
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = app.config.state.agentd_log
        self.roles = self._roles()
        self.observer: Any = None
        self.scan = MailScan(app.maildirs)

    def _roles(self) -> list[str]:
        """Async roles with triggers, and panels (a review panel wakes on review-requests, a
        writing panel's primary on clarification-requests and questions)."""
        roster = self.app.roster
        wanted = self.opts.roles or (*roster.roles, *(p.name for p in self.app.config.panels))
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
                    f"{self.app.config.file}: [agentd] roles: unknown role or panel {name!r}{roster.suggest(name)}"
                )
            role = roster.roles[name]
            if role.mode == "async" and role.triggers:
                self.watch_of[name] = (roster.mailboxes_of(name), role.triggers)
                out.append(name)
        return out

    # -- logging

    def log(self, event: str, **fields: Any) -> None:
        mids = fields.get("mids")
        if isinstance(mids, list) and len(mids) > LOG_MIDS:  # a burst's task holds thousands
            fields = {**fields, "mids": mids[:LOG_MIDS], "mids_total": len(mids)}
        rec = {"ts": round(time.time(), 6), "event": event, **fields}
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
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

        self.observer = Observer()
        handler = Handler()
        for name in self.roles:
            for box in self.watch_of[name][0]:
                self.app.maildirs.ensure(box)
                self.observer.schedule(handler, str(self.app.maildirs.path(box) / "new"), recursive=False)
        self.observer.start()

    # -- the loop

    def run(self) -> None:
        for t in self.tasks.recover():
            self.log("recovered", role=t.role, task=t.id, was="running")
        for info in locks.scan(self.app.config.state):
            why = locks.stale(info, self.opts.lock_ttl)
            if why:
                info.path.unlink(missing_ok=True)
                self.log("stale-lock", role=info.name, why=why)
        self.watch()
        self.log("started", roles=len(self.roles), rescan=self.opts.rescan, max_concurrent=self.opts.max_concurrent)
        last_sweep = 0.0
        try:
            woke = True
            while not self.stop.is_set():
                now = time.monotonic()
                if woke or now - last_sweep >= self.opts.rescan:
                    self.sweep()  # after the clear below: a file that woke us is seen by this sweep
                    last_sweep = now
                self.reap()
                self.dispatch()
                woke = self.wake.wait(0.1 if self.running else min(1.0, self.opts.rescan))
                self.wake.clear()
        finally:
            self.shutdown()

    def sweep(self) -> None:
        """Queue (or coalesce) one task per role with untaken unread trigger mail."""
        busy = self.tasks.busy_mids()
        stopped = self.tasks.stopped()
        index: Index | None = None
        try:
            for name in self.roles:
                boxes, triggers = self.watch_of[name]
                fresh: list[str] = []
                for m in self.scan.unread(boxes):
                    if m.event not in triggers or m.mid in busy or m.root in stopped:
                        continue
                    if index is None:
                        index = self.app.index()
                    if self._loop(index, m, stopped):
                        continue
                    fresh.append(m.mid)
                if fresh:
                    task, created = self.tasks.enqueue(name, fresh)
                    busy.update(fresh)
                    self.log(
                        "queued" if created else "coalesced",
                        role=name,
                        task=task.id,
                        mids=fresh,
                        messages=len(task.mids),
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
            self.escalate(None, f"loop detected, thread {root} no longer wakes anyone: {reason}", m.artifacts)
        return True

    def dispatch(self) -> None:
        if self.stop.is_set():
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
            if not self._still_unread(t):
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
        argv = [sys.executable, "-m", "workflow"]
        if self.opts.nice and shutil.which("nice"):
            argv = ["nice", "-n", str(self.opts.nice), *argv]
        if cfg.path is not None:
            argv += ["--config", str(cfg.path)]
        argv += ["--mail-root", str(cfg.mail_root), "run-role", "--with-email"]
        if self.opts.backend:
            argv += ["--backend", self.opts.backend]
        argv.append(t.role)
        env = {**os.environ, "WORKFLOW_RESULT_FILE": str(result), "WORKFLOW_TASK": str(t.id)}
        out = open(self.runs_dir / f"task-{t.id}.log", "ab")
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cfg.project_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()
        now = time.time()
        self.tasks.set_pid(t.id, proc.pid)
        self.running[t.id] = Running(t, proc, now, result)
        self.log("started", role=t.role, task=t.id, pid=proc.pid, mids=list(t.mids), attempt=t.attempts)

    def reap(self) -> None:
        for tid, run in list(self.running.items()):
            code = run.proc.poll()
            limit = self.opts.role_timeouts.get(run.task.role, self.opts.timeout)
            if code is None and time.time() - run.started > limit:
                _killpg(run.proc)
                run.proc.wait()
                del self.running[tid]
                self._failed(run.task, f"timed out after {limit:.0f}s; its process group was killed")
                continue
            if code is None:
                continue
            del self.running[tid]
            self._ended(run, code)
        if not self.running:
            return

    def _ended(self, run: Running, code: int) -> None:
        t = run.task
        try:
            res = json.loads(run.result_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            res = {}
        if code == 75:
            self.tasks.put_back(t.id, "role busy", time.time() + 1.0)
            self.log("busy", role=t.role, task=t.id, holder=res.get("busy", ""))
            return
        if code != 0:
            log_tail = _tail(self.runs_dir / f"task-{t.id}.log")
            self._failed(t, str(res.get("error") or f"run-role exited with status {code}: {log_tail}"), res)
            return
        handed = [m for m in res.get("handed", []) if m]
        mids = list(dict.fromkeys([*t.mids, *handed]))
        self.tasks.finish(t.id, TaskStatus.COMPLETED, "" if res.get("ran", True) else "nothing to do", mids=mids)
        self.tasks.failures(t.role, failed=False)
        self.log(
            "completed",
            role=t.role,
            task=t.id,
            mids=mids,
            ran=res.get("ran", True),
            took=round(time.time() - run.started, 3),
        )
        self._budget(t, res)

    def _budget(self, t: Task, res: dict[str, Any]) -> None:
        usage = res.get("usage") or {}
        tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        if not tokens:
            return
        total = self.tasks.add_usage(t.role, tokens)
        limit = int(self.opts.role_budgets.get(t.role, self.opts.daily_tokens))
        if limit and total > limit:
            why = f"over its daily token budget: {total} > {limit}"
            self.tasks.pause(t.role, why)
            self.log("paused", role=t.role, why=why)
            self.escalate(t, f"{t.role} is paused, {why}; `agentd resume {t.role}` after raising [agentd] budgets")

    def _failed(self, t: Task, error: str, res: dict[str, Any] | None = None) -> None:
        n = self.tasks.failures(t.role, failed=True)
        if res:
            self._budget(t, res)
        if t.attempts < self.opts.max_attempts:
            delay = self.opts.retry_backoff * (2 ** (t.attempts - 1))
            self.tasks.finish(t.id, TaskStatus.FAILED, error, retry_at=time.time() + delay)
            self.log("retry", role=t.role, task=t.id, attempt=t.attempts, delay=delay, error=error[:300])
        else:
            self.tasks.finish(t.id, TaskStatus.FAILED, error, dead=True)
            self.log("dead", role=t.role, task=t.id, attempts=t.attempts, error=error[:300])
            self.escalate(t, f"{t.role} failed {t.attempts} times and gave up on task {t.id}: {error[:500]}")
        if n >= self.opts.pause_after and t.role not in self.tasks.paused():
            why = f"{n} consecutive failures (pause_after {self.opts.pause_after}); last: {error[:200]}"
            self.tasks.pause(t.role, why)
            self.log("paused", role=t.role, why=why)

    def escalate(self, t: Task | None, details: str, artifacts: tuple[str, ...] = ()) -> None:
        """A blocker-report to the coordinator (from the failing role, else the default sender)."""
        app = self.app
        if t is not None and not artifacts:
            with app.index() as index:
                rows = index.query(message_ids=list(t.mids)) if t.mids else []
            artifacts = next((r.artifacts for r in rows if r.artifacts), ())
        artifact = artifacts[0] if artifacts else f"{app.config.artifact_roots[0]}/*/*"
        sender = t.role if t is not None and t.role != "coordinator" else app.config.default_sender
        to = (
            "coordinator"
            if sender != "coordinator" and "coordinator" in app.roster.roles
            else app.config.default_sender
        )
        req = NotifyRequest(
            "blocker-report",
            (artifact,),
            (to,),
            sender,
            None,
            {"BLOCKING_DETAILS": details, "CONTEXT": "sent by agentd"},
        )
        try:
            c = app.compose(req)
            c.send(make_transport(app.config, app.deliverer))
            self.log("escalated", role=sender, to=to, message_id=c.message_id, why=details[:200])
        except WorkflowError as e:
            self.log("escalation-failed", role=sender, error=str(e))

    def shutdown(self) -> None:
        """Stop taking work, let runs finish within the grace period, re-queue what is left."""
        if self.observer is not None:
            self.observer.stop()
            self.observer.join()
        end = time.monotonic() + self.opts.grace
        if self.running:
            self.log("stopping", running=len(self.running), grace=self.opts.grace)
        while self.running and time.monotonic() < end:
            self.reap()
            time.sleep(0.05)
        for tid, run in list(self.running.items()):
            _killpg(run.proc)
            run.proc.wait()
            self.tasks.put_back(tid, "agentd stopped before the run ended", time.time())
            self.log("requeued", role=run.task.role, task=tid)
        self.running.clear()
        self.log("stopped")
        self.tasks.close()


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, n: int = 400) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:].strip().replace("\n", " / ")
    except OSError:
        return ""
