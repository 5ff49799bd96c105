"""Launch: how agentd starts a run-role — forked from a warm process that has imported it already.

A run-role started as a new interpreter spends some 100 ms importing the CLI and run-role before
it does anything, on every run. agentd keeps a fork server instead (multiprocessing's
``forkserver``: a single-threaded process started once, with those modules imported) and forks
each run from it: the child leads a session of its own (agentd signals its process group, as
before), takes the niceness, working directory, environment and log agentd gives it, drops the
working directory from its module path (as ``python -P`` does: nothing in the project is ever
imported), and runs ``workflow ARGS`` exactly as the command does. Where the fork server cannot
start, each run is a process of its own (``python -P -m workflow ARGS``), as before.

``Launcher.start`` returns the run's handle: its ``pid`` and ``poll()`` (the exit status once it
ended, like ``subprocess.Popen``'s).
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

PRELOAD = [
    "workflow.agentd.launch",
    "workflow.cli.entry",
    "workflow.cli.main",
    "workflow.cli.run",
    "workflow.agents.backends.command",
]


class Handle(Protocol):
    """A started run-role."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


class Forked:
    """A run-role forked from the fork server."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def poll(self) -> int | None:
        return None if self.proc.is_alive() else int(self.proc.exitcode)


def _exposed(protected: Sequence[Path]) -> bool:
    """Whether the temporary directory (where the fork server listens) is inside ``protected``."""
    temp = Path(tempfile.gettempdir()).resolve()
    return any(temp == p.resolve() or p.resolve() in temp.parents for p in protected)


def _child(argv: list[str], cwd: str, env: dict[str, str], log: str, nice: int) -> None:
    """In the forked child: become the run-role agentd asked for, then run it (it never returns)."""
    os.setsid()
    if nice:
        os.nice(nice)
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.chdir(cwd)
    here = {"", ".", cwd, os.getcwd()}
    sys.path[:] = [p for p in sys.path if p not in here]  # as `python -P`: the project is never imported from
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["workflow", *argv]  # sys.stdout and sys.stderr write to fds 1 and 2: the log now
    try:
        runpy.run_module("workflow", run_name="__main__")  # `python -m workflow`: its modules are preloaded
    finally:
        os._exit(70)  # it exits by os._exit itself; reaching here means it raised


class Launcher:
    """Starts run-roles for one agentd: forked from a warm fork server, or as processes of their own.

    The fork server starts at once, from ``/``: Python's forkserver runs ``python -c`` and imports
    its preload with the working directory first on its module path, so started from a project
    it would import a ``workflow/`` or ``click/`` an agent left there — and every run after would
    be forked from it. Its socket lives in the temporary directory; one inside a directory an
    agent can see (``protected``: the project, the mail root) is refused, and runs are then
    processes of their own. ``preload``: what the runs' backends import besides (``Kind.preload``)."""

    def __init__(self, fork: bool = True, protected: Sequence[Path] = (), preload: Sequence[str] = ()) -> None:
        self.context: Any = None
        if fork and "forkserver" in multiprocessing.get_all_start_methods() and not _exposed(protected):
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([*PRELOAD, *preload])
            here = os.getcwd()
            os.chdir("/")  # before agentd starts any thread: nothing else runs while the directory is /
            try:
                from multiprocessing import forkserver  # lazy: only agentd starts one

                forkserver.ensure_running()
                self.context = context
            except OSError:
                pass
            finally:
                os.chdir(here)

    def start(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, nice: int = 0) -> Handle:
        """Start ``workflow ARGV`` in ``cwd`` with exactly ``env``, its output appended to ``log``."""
        if self.context is not None:
            try:
                proc = self.context.Process(target=_child, args=(list(argv), str(cwd), dict(env), str(log), nice))
                proc.start()
                return Forked(proc)
            except OSError:
                self.context = None  # the fork server could not start: processes of their own from now on
        prefix = ["nice", "-n", str(nice)] if nice else []
        with open(log, "ab") as out:
            return subprocess.Popen(
                [*prefix, sys.executable, "-P", "-m", "workflow", *argv],  # -P: the project never shadows the package
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
