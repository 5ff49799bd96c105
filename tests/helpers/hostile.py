"""Hostile round: a project whose command-backend agent is a Python script of
the attacker's, run by a real `run-role --with-email --backend command ROLE` in a real bubblewrap
sandbox."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from helpers.git import git_project, sh
from helpers.project import Project, with_smtp
from helpers.tiers import spawning

FINISH = (
    "import subprocess as _sp, sys as _sys\n"
    "def finish(status, summary):\n"
    "    _sp.run([_sys.executable, '-I', '-m', 'workflow', 'finish', status, summary], check=True)\n"
)


@spawning
def agent_project(base: Path, agent: str, *args: str, extra: str = "", smtp: str = "", timeout: int = 30) -> Project:
    """A `workflow init` project whose command backend runs ``agent`` (Python source; ``finish``
    is defined for it) with ``args``, committed; ``smtp``: lines for its [smtp] table; a
    review-request waits for spec-reviewer."""
    p = git_project(base, extra)
    if smtp:
        p = with_smtp(p, smtp)
    (p.dir / "agent.py").write_text(FINISH + agent)
    argv = ", ".join(f'"{a}"' for a in (sys.executable, "agent.py", *args))
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f"\n[backends.command]\nargv = [{argv}]\ntimeout = {timeout}\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "the agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p


def remove_chain(top: Path) -> None:
    """Remove a folder however deeply nested (iteratively, by folder fds: ``shutil.rmtree`` and
    pytest's own clean-up of old temporary directories recurse, and fail on one past the limit)."""
    if not top.is_dir():
        return
    fds, names = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)], [""]
    while fds:
        sub = None
        with os.scandir(fds[-1]) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    sub = e.name
                    break
                os.unlink(e.name, dir_fd=fds[-1])
        if sub is not None:
            fds.append(os.open(sub, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
            names.append(sub)
            continue
        os.close(fds.pop())
        name = names.pop()
        if fds:
            os.rmdir(name, dir_fd=fds[-1])
    top.rmdir()
