"""Chaos agent: the command-backend agent of the fault harness — does what its plan says, records all.

Run by run-role (``python tools/chaos_agent.py``, by path: tools/ is not installed) with ``$CHAOS_DIR`` set by the harness.
For the Message-IDs handed to the run it looks up each one's plan (``plans.json``, keyed by
``"ROLE MESSAGE-ID"``: one behaviour per attempt — ok, fail, hang, send-then-fail, fork) and acts
on the worst of them: it answers
each handed message with ``workflow-notify`` (inside the run, so the answers are staged), fails,
hangs past the run's timeout, or starts a ``setsid`` child that would outlive a run not contained.
Everything goes to ``log.jsonl``: the attempt, what it was handed, what it sent, how it ended.
It holds an ``flock`` on its role's file (and on one of ``max_concurrent`` slots) for its whole
life, inherited by its children: a second live run of a role, one run too many, or an escapee
still holding the lock after its run is recorded as a violation.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from workflow.agents.toolwire import call

WORST = ("hang", "fail", "send-then-fail", "fork", "ok")  # the first that any handed message plans wins
MARKER = "chaos-escapee"


def record(chaos: Path, entry: dict[str, object]) -> None:
    """One line, appended whole (O_APPEND, under PIPE_BUF) and synced."""
    fd = os.open(chaos / "log.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def hold(path: Path) -> bool:
    """Take an exclusive flock on ``path`` for the life of this process and its children."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    os.set_inheritable(fd, True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        os.close(fd)
        return False


def attempts_before(chaos: Path, role: str) -> dict[str, int]:
    """How many attempts of ``role`` each Message-ID was handed to so far (this one excluded)."""
    counts: dict[str, int] = {}
    try:
        lines = (chaos / "log.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return counts
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        for mid in e.get("handed", []) if "behavior" in e and e.get("role") == role else []:
            counts[mid] = counts.get(mid, 0) + 1
    return counts


def main() -> None:
    sys.stdin.read()
    chaos = Path(os.environ["CHAOS_DIR"])
    role = os.environ["WORKFLOW_ROLE"]
    handed = Path(os.environ["WORKFLOW_HANDED"]).read_text().split()
    attempt = f"{role}-{time.time_ns()}-{os.urandom(3).hex()}"
    if not hold(chaos / f"{role}.running"):
        record(chaos, {"violation": "two live runs of one role", "role": role, "attempt": attempt})
    settings = json.loads((chaos / "settings.json").read_text())
    if not any(hold(chaos / f"slot-{i}") for i in range(int(settings["max_concurrent"]))):
        record(chaos, {"violation": "more runs than max_concurrent", "role": role, "attempt": attempt})
    plans: dict[str, list[str]] = json.loads((chaos / "plans.json").read_text())
    before = attempts_before(chaos, role)
    wanted = []
    for mid in handed:
        plan = plans.get(f"{role} {mid}", ["ok"])
        wanted.append(plan[min(before.get(mid, 0), len(plan) - 1)])
    behavior = min(wanted or ["ok"], key=WORST.index)
    run = json.loads((Path(os.environ["WORKFLOW_RUN"]) / "info.json").read_text())
    record(
        chaos,
        {
            "attempt": attempt,
            "role": role,
            "handed": handed,
            "behavior": behavior,
            "start": time.time(),
            "run_role_pid": run.get("pid"),
        },
    )
    if behavior == "hang":
        time.sleep(600)
    if behavior == "fail":
        record(chaos, {"attempt": attempt, "end": "fail"})
        sys.exit(3)
    for mid in handed:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "workflow",
                "notify",
                "--in-reply-to",
                mid,
                "answer",
                "specs/*/chaos.md",
                "user",
                f"CONTEXT=answered by {attempt}",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0:
            record(chaos, {"attempt": attempt, "sent": r.stdout.strip(), "for": mid, "role": role})
        else:
            record(chaos, {"attempt": attempt, "send-refused": r.stderr.strip()[-300:], "for": mid})
    if behavior == "send-then-fail":
        record(chaos, {"attempt": attempt, "end": "fail"})
        sys.exit(3)
    if behavior == "fork":
        child = os.fork()
        if child == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(
                    sys.executable,
                    [sys.executable, "-c", "import time; time.sleep(300)", f"{MARKER}-{settings['tag']}"],
                )
            os._exit(0)
        # the escape is made (its own session) before the run may end: a run that ended first would
        # stop the child with its process group, and nothing would have escaped to be caught
        os.waitpid(child, 0)
    finished = call(os.environ["WORKFLOW_TOOLS"], "finish", {"status": "done", "summary": f"answered {len(handed)}"})
    if not finished.get("ok"):
        record(chaos, {"attempt": attempt, "finish-refused": str(finished.get("text"))[-300:]})
    record(chaos, {"attempt": attempt, "end": "ok"})


if __name__ == "__main__":
    main()
