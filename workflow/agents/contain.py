"""Contain: start an agent's process so that nothing it starts can outlive its run.

A process group is not enough: an agent's children can leave it (``setsid``, a double fork).
Two kernel mechanisms cannot be escaped that way, and are used in this order:

* **bubblewrap** (``bwrap --unshare-pid --die-with-parent``): the agent runs as the first child
  of a new PID namespace's init; when the agent exits, or its run-role dies (even by SIGKILL), the
  init dies and the kernel kills every process in the namespace.
* **a cgroup v2 directory per run**: the agent is moved into it before it starts; ending the run
  writes ``cgroup.kill``.
* otherwise only the **process group** is killed, and ``workflow doctor`` says so.

A run-role killed with SIGKILL cannot end its run. bubblewrap's ``--die-with-parent`` takes the
agent with it — unless run-role died while bubblewrap was still starting, before it could tie
itself to its parent's life. So whatever the containment, the next run of the role, when it
recovers the crashed run, first kills what the run left (``leftovers``): its cgroup, its agent's
process group (``agent.json``), and every process whose environment names the run
(``$WORKFLOW_RUN``), setsid or not.

``[backends.command] contain`` forces one (``bwrap``, ``cgroup``, ``none``); the default is ``auto``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

from workflow.agents.locks import pid_alive, process_start

MODES = ("auto", "bwrap", "cgroup", "none")
BWRAP_ARGS = ("--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--")


class Mode(NamedTuple):
    name: str  # bwrap | cgroup | none
    complete: bool  # every descendant dies with the run, setsid or not
    why: str  # what it does, or what it cannot guarantee


@functools.cache
def bwrap_works(bwrap: str) -> bool:
    """Whether bubblewrap can make its namespaces here (asked once per process: a run asks it for
    the sandbox and for the containment, run-role for its warning)."""
    try:
        r = subprocess.run([bwrap, *BWRAP_ARGS, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def cgroup2_root() -> Path | None:
    """The cgroup v2 mount we may create directories under (found in mountinfo, not assumed)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            mount = Path(left.split()[4])
            if (mount / "cgroup.procs").exists() and os.access(mount, os.W_OK):
                return mount
    return None


def choose(wanted: str = "auto") -> Mode:
    """The containment to use (``wanted``: one of MODES)."""
    bwrap = shutil.which("bwrap")
    if wanted in ("auto", "bwrap") and bwrap and bwrap_works(bwrap):
        return Mode("bwrap", True, "a PID namespace per run (bubblewrap): nothing an agent starts outlives it")
    root = cgroup2_root() if wanted in ("auto", "cgroup") else None
    if root is not None and (root / "cgroup.kill").exists():
        return Mode("cgroup", True, f"a cgroup v2 directory per run under {root}, killed when the run ends")
    if wanted == "none":
        return Mode("none", False, 'containment switched off ([backends.command] contain = "none")')
    return Mode(
        "none",
        False,
        "neither bubblewrap nor a writable cgroup v2 hierarchy is available: only the "
        "agent's process group is killed, so processes it moves to another session (setsid, a double "
        "fork) can outlive its run — install bubblewrap (scripts/system-packages)",
    )


class Contained:
    """One contained agent process: ``wait`` for it, ``kill`` everything it started."""

    def __init__(
        self,
        argv: Sequence[str],
        mode: Mode,
        run_dir: Path | None,
        *,
        stdin: int,
        stdout: int,
        stderr: int,
        cwd: Path,
        env: dict[str, str],
        view: Sequence[str] = (),
    ) -> None:
        """``view``: bubblewrap's arguments for a sandbox (``agents.sandbox``), in mode bwrap only."""
        self.mode = mode
        self.cgroup: Path | None = None
        full = list(argv)
        if mode.name == "bwrap":
            full = [shutil.which("bwrap") or "bwrap", *(list(view) + ["--"] if view else BWRAP_ARGS), *full]
        elif mode.name == "cgroup":
            root = cgroup2_root()
            if root is not None:
                self.cgroup = root / f"workflow-run-{os.getpid()}-{os.urandom(4).hex()}"
                self.cgroup.mkdir()
                # the shell joins the cgroup, then becomes the agent: nothing runs outside it
                full = ["sh", "-c", 'echo 0 > "$1/cgroup.procs" && shift && exec "$@"', "sh", str(self.cgroup), *full]
        self.proc: subprocess.Popen[str] = subprocess.Popen(
            full, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env, start_new_session=True, text=True
        )
        if run_dir is not None:  # for the next run of the role, should this run-role be killed
            agent = {"pid": self.proc.pid, "pstart": process_start(self.proc.pid), "cgroup": str(self.cgroup or "")}
            (run_dir / "agent.json").write_text(json.dumps(agent))

    @property
    def stdin(self) -> IO[Any] | None:
        return self.proc.stdin

    def communicate(self, text: str, timeout: float) -> tuple[str, str]:
        out, err = self.proc.communicate(text, timeout=timeout)
        return out or "", err or ""

    def kill(self) -> None:
        """End the agent and everything it started; then reap it."""
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass

    def close(self) -> None:
        """After the agent exited by itself: its leftovers go too (bwrap's init already took them)."""
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        else:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def leftovers(run_dir: Path) -> int:
    """Kill every process a crashed run left alive (call holding the role's lock, before the run's
    directory is removed); returns how many there were."""
    victims: set[int] = set()
    try:
        agent = json.loads((run_dir / "agent.json").read_text())
    except (OSError, ValueError):
        agent = {}
    if agent.get("cgroup") and Path(agent["cgroup"]).is_dir():
        try:
            victims.update(int(p) for p in (Path(agent["cgroup"]) / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            pass
        kill_cgroup(Path(agent["cgroup"]))
    pid = int(agent.get("pid") or 0)
    if pid and agent.get("pstart") and process_start(pid) == agent.get("pstart"):
        victims.add(pid)
        try:
            os.killpg(pid, signal.SIGKILL)  # the agent started its own session: its group is its pid
        except (ProcessLookupError, PermissionError):
            pass
    marker = f"WORKFLOW_RUN={run_dir / 'agent'}".encode()
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            environ = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            victims.add(int(d.name))
            try:
                os.kill(int(d.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    end = time.monotonic() + 5
    while any(pid_alive(v) for v in victims) and time.monotonic() < end:
        time.sleep(0.01)
    return len(victims)


def kill_session(sid: int) -> None:
    """SIGKILL what is left of session ``sid`` (a run-role leads its own): the process groups of
    its own inside it too — each owner-side git it ran has one (``artifacts.gitcmd``). Only while
    a member lives is the id the session's, so only members are found."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(sid):  # stat: state, ppid, pgrp, session
            try:
                os.kill(int(d.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def kill_cgroup(cgroup: Path) -> None:
    """Kill every process in a run's cgroup and remove it."""
    try:
        (cgroup / "cgroup.kill").write_text("1")
    except OSError:
        try:
            for pid in (cgroup / "cgroup.procs").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            return
    for _ in range(100):
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)  # busy until the killed processes are gone
