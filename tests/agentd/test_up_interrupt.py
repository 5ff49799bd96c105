"""Ctrl-C on ``workflow up`` (issue 48, problem 10): at whatever moment it comes, nothing `up`
started is left running, and what it waits for is said with how long."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.agentd import default_sigint, project
from helpers.git import GIT_ENV
from helpers.project import free_port

STEPS = [round(0.1 * i, 1) for i in range(1, 31)]  # 0.1 s … 3.0 s after the start
LANES = 3  # projects interrupted side by side (each its own ports and mail root), to keep the test short


def group(pgid: int) -> list[str]:
    """The processes of process group ``pgid`` still alive (zombies are gone: their parent is)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out.append(f"{entry} {argv[:120]}")
    return out


def interrupt_at(directory: Path, after: float, log: Path) -> list[str]:
    """Start `workflow up --web`, SIGINT it (only it, as `kill -INT` does) ``after`` seconds later;
    the processes of its group still running once it exited (waiting up to 15 s for them)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV}
    with open(log, "ab") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "workflow", "up", "--web"],
            cwd=directory,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: everything it starts is counted in it
            preexec_fn=default_sigint,
        )
    time.sleep(after)
    up.send_signal(signal.SIGINT)
    up.wait(60)
    end = time.monotonic() + 15
    while group(up.pid) and time.monotonic() < end:
        time.sleep(0.05)
    left = group(up.pid)
    for line in left:  # never leak them into the rest of the suite
        os.kill(int(line.split()[0]), signal.SIGKILL)
    return left


def test_a_sigint_at_any_moment_of_ups_first_3_seconds_leaves_nothing_running(tmp_path: Path) -> None:
    dirs = []
    for lane in range(LANES):
        p = project(tmp_path / f"lane{lane}", ["spec-reviewer"])
        toml = p.dir / "workflow.toml"
        toml.write_text(toml.read_text() + f"\n[web]\nport = {free_port()}\n")
        dirs.append(p.dir)
    found: dict[float, list[str]] = {}

    def lane(k: int) -> None:
        for after in STEPS[k::LANES]:
            found[after] = interrupt_at(dirs[k], after, tmp_path / f"lane{k}.out")

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(LANES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logs = "\n".join((tmp_path / f"lane{k}.out").read_text()[-2000:] for k in range(LANES))
    assert sorted(found) == STEPS
    assert {after: left for after, left in found.items() if left} == {}, logs
    assert "waiting up to 30 s for smtpd and web to stop" in logs, logs
