"""agentd: a real agentd process over a git project, and what its log and the runs' prompts say."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from helpers.git import GIT_ENV, git_project
from helpers.project import Project
from helpers.tiers import spawning
from workflow.agentd.status import status

AGENTD = """
[backends.scripted]
record_dir = "prompts"

[agentd]
rescan = {rescan}
roles = {roles}
{extra}
"""


def project(tmp_path: Path, roles: list[str], extra: str = "", rescan: float = 1) -> Project:
    return git_project(tmp_path / "ad", AGENTD.format(roles=json.dumps(roles), extra=extra, rescan=rescan))


def default_sigint() -> None:
    """preexec_fn for a child the test will Ctrl-C: SIGINT back to its default action. A shell
    that starts the test run in the background (``… &``) leaves SIGINT ignored, and a Python
    child then keeps ignoring it, as every Unix program does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@spawning
class Daemon:
    def __init__(self, p: Project) -> None:
        self.p = p
        before = len(self.boots())
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
        self.out = p.dir.parent / "agentd.out"
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "workflow", "agentd", "run"],
                cwd=p.dir,
                env={**env, **GIT_ENV},
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=default_sigint,
            )
        self.wait_for(lambda: len(self.boots()) > before, "agentd to start")

    def boots(self) -> list[dict[str, object]]:
        return [e for e in self.events("started") if "roles" in e]

    @property
    def log(self) -> Path:
        return self.p.app.config.state.agentd_log

    def events(self, kind: str | None = None) -> list[dict[str, object]]:
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = [json.loads(line) for line in lines if line.strip()]
        return [e for e in out if kind is None or e["event"] == kind]

    def wait_for(self, cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"agentd exited ({self.proc.returncode}) waiting for {what}: {self.out.read_text()[-2000:]}"
                )
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; log: {self.events()}")

    def stop(self, sig: int = signal.SIGTERM) -> str:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)
        return self.out.read_text()

    def idle(self) -> bool:
        """Nothing queued that is due, nothing running."""
        s = status(self.p.app)
        return not s.running and not [q for q in s.queued if q.due_in == 0]


def prompts(p: Project, role: str) -> list[str]:
    d = p.dir / "prompts"
    return [f.read_text() for f in sorted(d.glob(f"{role}-*.prompt.md"))] if d.is_dir() else []


def alive(pid: int) -> bool:
    """Whether a process lives (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def procs_with(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds ``marker`` (works across PID namespaces)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes() and alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                continue
    return out
