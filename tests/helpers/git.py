"""Git: a project made by `workflow init` in a real git repository, and reading what its mail says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.project import Project, make_project
from helpers.tiers import spawning
from workflow.core.modes import OWNER_UMASK
from workflow.mail.message import parse
from workflow.ops.scaffold import init

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


@spawning
def sh(p: Project, *cmd: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    env.update(GIT_ENV)
    r = subprocess.run(cmd, cwd=cwd or p.dir, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    return r


@spawning
def git_project(base: Path, extra: str = "") -> Project:
    """A project made by `workflow init` in a real git repo, with the spec committed in proposed/."""
    p = make_project(base, extra)
    (p.dir / ".gitignore").write_text("mail/\n")
    initialized(p.dir)
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "spec-writer: propose user-auth")
    return p


def initialized(directory: Path) -> None:
    """``workflow init DIRECTORY`` in this process: the command's own library call
    (``ops.scaffold.init``), under the owner-only umask the command sets. Hundreds of tests start
    from such a project; tests of ``workflow init`` itself run the command."""
    old = os.umask(OWNER_UMASK)
    try:
        init(directory)
    finally:
        os.umask(old)


def mail(p: Project, event: str | None = None) -> list[tuple[str, str | None, str | None, tuple[str, ...]]]:
    """(mailbox, event, state, artifacts) of every stored copy."""
    for _ in range(20):  # a run may move a copy from new/ to cur/ while we read: list again
        out = []
        try:
            for f in p.new_files():
                m = parse(f.read_bytes())
                if event is None or m.event == event:
                    out.append((f.parent.parent.name, m.event, m.state, tuple(m.artifacts)))
        except FileNotFoundError:
            continue
        return sorted(out)
    raise AssertionError("mailboxes kept changing while being read")
