"""Chaos check: a played schedule judged promise by promise, with counts.

A run counts as *failed* when its agent failed or never finished (hung past its timeout, killed)
or its run-role was killed before its commit; as *successful* when agentd saw its run-role
complete. Any other run (its run-role stopped after its agent succeeded) must have delivered all
of its mail or none.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from tools.chaos import MAX_CONCURRENT, Played, Schedule, play, schedule
from tools.chaos_record import completed_runs, escapees, held, record, stored


class Verdict(NamedTuple):
    promise: str
    checked: int
    unit: str
    violations: tuple[str, ...]
    counts: tuple[tuple[str, int], ...] = ()  # what else was seen, for the tally


def check(p: Played) -> list[Verdict]:
    """Judge a played schedule; leftover escapees are killed once counted."""
    s = p.schedule
    attempts, seen = record(p.chaos)
    copies = stored(p.project)
    replies = [c for c in copies if c.mailbox == "user" and c.attempt]
    delivered: dict[str, int] = {}
    for c in replies:
        delivered[c.message_id] = delivered.get(c.message_id, 0) + 1
    completed = completed_runs(p.project)
    killed_open = {k.pid for k in p.killed if k.state in ("open", "rolling-back")}
    killed_committing = {k.pid for k in p.killed if k.state == "committing"}
    out: list[Verdict] = []

    # 1. every triggered (role, message) answered by exactly one successful run
    bad = []
    for role, mid in sorted(s.pairs()):
        by = sorted({c.attempt for c in replies if (c.sender, c.in_reply_to) == (role, mid)})
        n = sum(1 for c in replies if (c.sender, c.in_reply_to) == (role, mid))
        if n != 1 or len(by) != 1:
            bad.append(f"{role} {mid}: answered {n} time(s) by {len(by)} run(s) {by}")
        elif by[0] not in attempts or mid not in attempts[by[0]].handed:
            bad.append(f"{role} {mid}: answered by {by[0]}, which was not handed it")
    for c in replies:
        if (c.sender, c.in_reply_to) not in s.pairs():
            bad.append(f"an answer from {c.sender} to {c.in_reply_to}, which it was never sent")
    out.append(
        Verdict("every (role, message) handled by exactly one successful run", len(s.pairs()), "pairs", tuple(bad))
    )

    # 2, 3. concurrency, as the agents saw it when they started
    for what in ("two live runs of one role", "more runs than max_concurrent"):
        v = tuple(f"{e.get('attempt')}: {what}" for e in seen if e["violation"] == what)
        name = "never two live runs of one role" if what.startswith("two") else f"never more than {MAX_CONCURRENT} runs"
        out.append(Verdict(name, len(attempts), "runs", v))

    # 4. nothing of a finished run alive
    bad = [f"pid {pid}: a process a run started outlived it" for pid in escapees(s.tag)]
    for f in sorted(p.chaos.glob("*.running")) + sorted(p.chaos.glob("slot-*")):
        if held(f):
            bad.append(f"{f.name} is still held by a process after every run ended")
    for pid in escapees(s.tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out.append(Verdict("no process of a finished run alive", len(attempts), "runs", tuple(bad)))

    # 5. a failed or killed run delivers nothing
    failed = [a for a in attempts.values() if a.end != "ok" or a.run_role in killed_open]
    bad = [
        f"{a.id} ({a.behavior}, end {a.end}) failed, yet {m} was delivered"
        for a in failed
        for m in a.sent
        if m in delivered
    ]
    bad += [f"{c.message_id} names {c.attempt}, a failed run" for c in replies if c.attempt in {a.id for a in failed}]
    sent = (("answers sent by failed or killed runs (held back)", sum(len(a.sent) for a in failed)),)
    out.append(Verdict("no mail of a failed or killed run delivered", len(failed), "runs", tuple(bad), sent))

    # 6. a successful run's mail is delivered, once; any other run's all or nothing
    # (a run-role killed while committing succeeded: the next run of its role finishes the commit)
    ok = [a for a in attempts.values() if a.end == "ok" and a.run_role in completed | killed_committing]
    bad = [
        f"{a.id}: {m} delivered {delivered.get(m, 0)} time(s)" for a in ok for m in a.sent if delivered.get(m, 0) != 1
    ]
    for a in attempts.values():
        got = [m for m in a.sent if m in delivered]
        if got and len(got) != len(a.sent):
            bad.append(f"{a.id}: {len(got)} of its {len(a.sent)} answers delivered")
    boxes: dict[tuple[str, str], int] = {}
    for c in copies:
        boxes[(c.mailbox, c.message_id)] = boxes.get((c.mailbox, c.message_id), 0) + 1
    bad += [f"{mid} stored {n} times in {box}" for (box, mid), n in sorted(boxes.items()) if n > 1]
    sent = (("answers sent by successful runs", sum(len(a.sent) for a in ok)),)
    out.append(Verdict("every mail of a successful run delivered exactly once", len(ok), "runs", tuple(bad), sent))

    # 7. settled: no lock, no run directory, no task queued or running (play waited for this)
    bad = [] if p.settled else [f"not settled after {p.waited:.0f}s: locks, run directories or tasks left"]
    bad += list(p.problems)
    out.append(Verdict("every lock and task settled", 1, "schedule", tuple(bad)))
    return out


class Tally:
    """Verdicts and faults summed over a campaign of schedules."""

    def __init__(self) -> None:
        self.schedules = 0
        self.checked: dict[str, tuple[int, str]] = {}
        self.violations: dict[str, list[str]] = {}
        self.faults: dict[str, int] = {}

    def count(self, what: str, n: int = 1) -> None:
        self.faults[what] = self.faults.get(what, 0) + n

    def add(self, p: Played, verdicts: list[Verdict]) -> None:
        self.schedules += 1
        for v in verdicts:
            n, _ = self.checked.get(v.promise, (0, v.unit))
            self.checked[v.promise] = (n + v.checked, v.unit)
            self.violations.setdefault(v.promise, []).extend(f"schedule {p.schedule.number}: {x}" for x in v.violations)
            for what, n_seen in v.counts:
                self.count(what, n_seen)
        for m in p.schedule.mails:
            self.count(f"mails: {m.shape}")
        self.count("(role, message) pairs", len(p.schedule.pairs()))
        attempts, _ = record(p.chaos)
        for a in attempts.values():
            self.count(f"agent attempts: {a.behavior}")
        self.count("agentd SIGKILL + restart", p.agentd_kills)
        self.count("agentd SIGTERM + restart", p.agentd_stops)
        for k in p.killed:
            self.count(f"run-role SIGKILL (run {k.state})")
        self.count("run-role SIGKILL that found no run going", p.kill_misses)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def report(self) -> str:
        lines = [f"{'promise':<66}{'checked':>14}{'violations':>12}"]
        for key, (n, unit) in self.checked.items():
            lines.append(f"{key:<66}{f'{n} {unit}':>14}{len(self.violations.get(key, [])):>12}")
        lines += ["", f"{'faults and load injected':<66}{'count':>14}"]
        lines += [f"{k:<66}{v:>14}" for k, v in sorted(self.faults.items())]
        for key, vs in self.violations.items():
            if vs:
                lines += ["", f"VIOLATED: {key}"] + [f"  {v}" for v in vs[:20]]
                if len(vs) > 20:
                    lines.append(f"  … and {len(vs) - 20} more")
        return "\n".join(lines)


def campaign(
    seed: int,
    schedules: int,
    base: Path,
    echo: Callable[[str], None],
    *,
    jobs: int = 1,
    keep: bool = False,
    contain: str = "auto",
) -> Tally:
    """Play schedules 0 … ``schedules``-1 of ``seed`` (``jobs`` at a time), check each, tally all.
    A schedule's scratch project is removed when it held every promise, unless ``keep``."""
    tally = Tally()
    width = len(str(schedules))

    def one(s: Schedule) -> tuple[Played, list[Verdict], float]:
        t0 = time.monotonic()
        p = play(base, s, contain=contain, stop=stop)
        return p, check(p), time.monotonic() - t0

    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for p, verdicts, took in pool.map(one, (schedule(seed, i) for i in range(schedules))):
            tally.add(p, verdicts)
            broken = sum(len(v.violations) for v in verdicts)
            echo(
                f"[{p.schedule.number + 1:>{width}}/{schedules}] {p.schedule.digest()} "
                f"{'ok' if not broken else f'{broken} VIOLATION(S)'} in {took:4.1f}s: {p.schedule.describe()}"
                + (f" — kept in {p.project}" if broken or keep else "")
            )
            if not broken and not keep:
                shutil.rmtree(p.project, ignore_errors=True)
    except BaseException:
        stop.set()  # Ctrl-C: the schedules being played stop their stacks and end
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return tally
