"""Git lock: one project lock around every owner-side git write, so concurrent runs queue.

Two runs that move or commit at the same moment would otherwise meet on git's own
``index.lock`` and one would fail ("Unable to create '.git/index.lock'"). Every owner-side git
write — a move, a run's commit of its edits, a rollback, the post-commit hook — takes this lock
(``flock`` on ``<state>/git.lock``: released by the kernel when its holder dies, so a crash never
leaves it held). A git command run while holding it gets ``WORKFLOW_GIT_LOCKED`` in its
environment, and the hook it runs sees that its parent holds the lock and does not wait for it.

Inside a sandbox the state directory is hidden: an agent's own ``workflow move`` takes no lock
(nothing it could hold would bind the owner anyway) and relies on ``gitcmd.run_git`` waiting out
a busy ``index.lock`` instead.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from workflow.artifacts import gitcmd
from workflow.core.config import Config
from workflow.core.errors import GitError

MARKER = "WORKFLOW_GIT_LOCKED"
WAIT = 300.0  # seconds: a git write never takes this long; past it something is wedged


def held_by_parent() -> bool:
    """Whether this process runs under a git command whose caller holds the lock (a hook)."""
    return os.environ.get(MARKER) == "1"


def identity(config: Config) -> dict[str, str]:
    """The committer to name when git has none configured (``git var`` fails): the owner, as
    ``workflow-mail <owner@DOMAIN>``; nothing when git has one."""
    p = gitcmd.run(["var", "GIT_COMMITTER_IDENT"], config.project_dir, skip=(config.mail_root,))
    if p.code == 0:
        return {}
    return {"GIT_COMMITTER_NAME": "workflow-mail", "GIT_COMMITTER_EMAIL": f"owner@{config.domain}"}


@contextmanager
def project_lock(config: Config, wait: float = WAIT) -> Iterator[dict[str, str]]:
    """Hold the project's git lock; yields the environment for git commands run under it (with a
    committer identity of the owner's when git has none configured: a run's commit never fails
    for want of ``user.email`` on a fresh machine)."""
    env = {MARKER: "1", **identity(config)}
    if held_by_parent():
        yield env
        return
    path = config.state.git_lock
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # the state directory is out of sight (a sandbox) or read-only: no lock to take
        yield env
        return
    try:
        end = time.monotonic() + wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                why = gitcmd.stopped()
                if why:  # the work waiting for it has ended (a run's tool call, at the run's end)
                    raise GitError(f"gave up waiting for the project's git lock ({path}): {why}") from None
                if time.monotonic() > end:
                    raise GitError(
                        f"the project's git lock ({path}) has been held for {wait:.0f}s; is a git command stuck?"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        yield env
    finally:
        os.close(fd)  # closing releases the flock
