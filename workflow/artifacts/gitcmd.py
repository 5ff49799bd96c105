"""Git command: the one place that builds the owner's git command line and environment, and runs it.

Every owner-side git command (``run_git``, ``Repo.git``, ``run``) is built here, so none obeys
what an agent could plant:

* ``PINNED`` options: no replace refs, no fsmonitor, no recursion into submodules, and the
  commands that compare the work tree (``ENTERS``) told ``--ignore-submodules=dirty``: git never
  starts a git of its own inside an embedded repository — whose config, filters, textconv and
  hooks are the agent's — while a gitlink itself stays visible to the checks that refuse one;
* ``gitlayout.problem`` first: a redirect in ``.git``, a symlink where git writes, a FIFO where
  git reads refuse the command, naming the file;
* a deadline: a git that does not finish in time (stuck on what the check could not see) is
  stopped with everything it started (its own process group), and the call fails saying so.
  Inside a ``Scope`` (a run's tool calls) the run's deadline bounds it too, and ``Scope.stop``
  (the run has ended) stops what is still running.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import NamedTuple

from workflow.artifacts import gitlayout
from workflow.core.errors import GitError, GitLayoutError

PINNED = (
    "--no-replace-objects",  # a replace ref never passes one commit off as another
    "-c",
    "core.fsmonitor=false",  # the repository's config never makes our git run a program
    "-c",
    "submodule.recurse=false",  # checkout, mv and friends never recurse into an embedded repository
    "-c",
    "diff.ignoreSubmodules=dirty",  # nor does diff or status, for the hooks' own git (ENTERS says it again)
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "diff.submodule=short",  # a gitlink's change is shown as its ids, never as a diff run inside it
    "-c",
    "fetch.recurseSubmodules=false",
    "-c",
    "push.recurseSubmodules=no",
)
# what compares the work tree, the index or trees, gitlinks included: told on its command line
# (which a .gitmodules' `ignore = none` cannot override) to judge a gitlink by its commit, never
# entering it and never reading .gitmodules for it (an `update = !cmd` there makes git die)
ENTERS = frozenset({"status", "diff", "diff-index", "diff-files", "diff-tree", "log", "show"})
DEADLINE = 240.0  # seconds any owner-side git may take (the project's git lock waits 300 s for its holder)
AFTER_STOP = 10.0  # seconds a git may take once its scope was stopped (a move putting itself back)
GRACE = 2.0  # seconds between asking a stopped git to end (its lock files go) and killing it
INDEX_BUSY_WAIT = 10.0  # seconds to wait out another git's index.lock (a person's git, an agent's)


def argv(args: Sequence[str]) -> list[str]:
    """The command line of ``git ARGS`` as the owner runs it (``args[0]``: the subcommand)."""
    if not args or args[0].startswith("-"):
        raise ValueError(f"a git command starts with its subcommand, not {list(args)[:1]}")
    extra = ["--ignore-submodules=dirty"] if args[0] in ENTERS else []
    return ["git", *PINNED, args[0], *extra, *args[1:]]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the owner's git: the owner's own, with ``env`` over it."""
    return {**os.environ, **(env or {})}


class Scope:
    """The owner's git commands of one piece of work — a run's tool calls (``active``): each ends
    by ``deadline`` (``time.monotonic()``) at the latest, and ``stop`` ends them all at once."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.why = ""  # set by stop
        self._guard = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within the block (in this thread), git commands belong to this scope."""
        token = CURRENT.set(self)
        try:
            yield
        finally:
            CURRENT.reset(token)

    def limit(self, seconds: float) -> float:
        """How long a git command started now may take."""
        now = time.monotonic()
        end = now + seconds
        if self.deadline is not None:
            end = min(end, self.deadline)
        if self.why:
            end = min(end, now + AFTER_STOP)
        return max(end - now, 0.5)

    def stop(self, why: str) -> int:
        """End the scope's running git commands (each call fails with ``why``); any started later
        gets ``AFTER_STOP`` seconds at most. Returns how many were running."""
        with self._guard:
            self.why = why
            running = list(self._running)
        for p in running:
            _end(p, functools.partial(self._has, p))
        return len(running)

    def busy(self) -> int:
        """How many of the scope's git commands are running now."""
        with self._guard:
            return len(self._running)

    def _enter(self, p: subprocess.Popen[bytes]) -> None:
        with self._guard:
            self._running.add(p)

    def _leave(self, p: subprocess.Popen[bytes]) -> None:
        with self._guard:
            self._running.discard(p)

    def _has(self, p: subprocess.Popen[bytes]) -> bool:
        with self._guard:
            return p in self._running


# the scope of the work this thread is doing, several layers above the git it runs (a tool call's
# move); a ContextVar, so each thread sees its own and none is shared
CURRENT: ContextVar[Scope | None] = ContextVar("workflow_git_scope", default=None)


def stopped() -> str:
    """Why the current scope was stopped ("" when it was not, or there is none): a wait for the
    project's git lock gives up then."""
    scope = CURRENT.get()
    return scope.why if scope is not None else ""


def _signal(p: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # git and what it started: hooks, filters
    except (ProcessLookupError, PermissionError):
        pass


def _end(p: subprocess.Popen[bytes], still: Callable[[], bool]) -> None:
    """Ask ``p``'s process group to end (git removes its lock files), then kill it after
    ``GRACE`` while ``still()`` says its caller waits on it."""
    _signal(p, signal.SIGTERM)

    def kill() -> None:
        if still():
            _signal(p, signal.SIGKILL)

    timer = threading.Timer(GRACE, kill)
    timer.daemon = True
    timer.start()


class Completed(NamedTuple):
    code: int
    out: bytes
    err: str


def run(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    skip: Collection[Path] = (),
    timeout: float = DEADLINE,
    pass_fds: tuple[int, ...] = (),
) -> Completed:
    """Run ``git ARGS`` in ``cwd`` as the owner; its exit code is the caller's to judge.
    GitLayoutError when the layout refuses it (``gitlayout.problem``; ``skip``: folders of the
    tree never walked, the mail root); GitError when it takes longer than ``timeout`` (or its scope allows), or when
    its scope is stopped while it runs."""
    problem = gitlayout.problem(Path(cwd), skip)
    if problem:
        raise GitLayoutError(
            f"refusing to run git here: {problem} (a run's agent may have planted it; `workflow doctor`)"
        )
    scope = CURRENT.get()
    limit = scope.limit(timeout) if scope is not None else timeout
    try:
        p = subprocess.Popen(
            argv(args),
            cwd=cwd,
            env=environment(env),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,  # its own group: stopped with everything it started
            pass_fds=pass_fds,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    if scope is not None:
        scope._enter(p)
    waiting = True
    try:
        out, err = p.communicate(input, timeout=limit)
    except subprocess.TimeoutExpired:
        _end(p, lambda: waiting)
        out, err = _drain(p)
        raise GitError(
            f"git {args[0]} did not finish within {limit:.0f}s and was stopped: something it reads may be a FIFO "
            "or a device (a run's agent may have planted it; `workflow doctor`)"
        ) from None
    except BaseException:  # interrupted: the git goes with us
        _end(p, lambda: waiting)
        raise
    finally:
        waiting = False
        if scope is not None:
            scope._leave(p)
    if scope is not None and scope.why and p.returncode < 0:
        raise GitError(f"git {args[0]} was stopped: {scope.why}")
    return Completed(p.returncode, out, err.decode("utf-8", "replace"))


def _drain(p: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What a stopped git printed, once it is gone (at most ``2 * GRACE`` seconds: a process that
    left its group keeps the pipes open, and then its pipes are closed on it)."""
    try:
        return p.communicate(timeout=2 * GRACE)
    except subprocess.TimeoutExpired:
        for f in (p.stdout, p.stderr):
            if f is not None:
                f.close()
        return b"", b""


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    env: dict[str, str] | None = None,
    input: str | None = None,
    skip: Collection[Path] = (),
    pass_fds: tuple[int, ...] = (),
) -> str:
    """Run git; return stdout. A failure raises GitError carrying git's own message. A command
    that meets another git's ``index.lock`` is tried again for a while: our own writes queue on
    the project's lock (``gitlock``), but a person's git or an agent's may hold the index."""
    end = time.monotonic() + INDEX_BUSY_WAIT
    delay = 0.01
    data = input.encode("utf-8", "surrogateescape") if input is not None else None
    while True:
        p = run(args, cwd, env=env, input=data, skip=skip, pass_fds=pass_fds)
        if p.code == 0 or "index.lock" not in p.err or time.monotonic() > end:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    if check and p.code != 0:
        msg = (p.err or p.out.decode("utf-8", "replace")).strip().splitlines()
        raise GitError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {p.code}'}")
    return p.out.decode("utf-8", "surrogateescape")
