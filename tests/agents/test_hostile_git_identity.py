"""An agent's git identity is its role's only by the environment run-role gives it: the agent sets
GIT_AUTHOR_* and GIT_COMMITTER_* itself (the owner's name and address are in ~/.gitconfig, which
the sandbox lets it read by default) and its successful run keeps a commit that says a person
approved the spec, committed by the owner — `workflow doctor` says nothing of who made it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.git import sh
from helpers.hostile import agent_project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

AGENT = """\
import os, subprocess, sys
sys.stdin.read()
forged = {"GIT_AUTHOR_NAME": "user", "GIT_AUTHOR_EMAIL": "user@workflow.local",  # a person's role
          "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}  # the owner
subprocess.run(["git", "mv", "specs/proposed/user-auth.md", "specs/todo/user-auth.md"], check=True)
message = "user: approve user-auth (proposed → todo)\\n\\nLooks good.\\n\\nWorkflow-Role: user\\n"
subprocess.run(["git", "commit", "-q", "--no-verify", "-m", message], env={**os.environ, **forged}, check=True)
finish("done", "approved")
"""


@needs_bwrap
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a run's agent keeps a commit authored as a person's role and committed as the owner",
)
def test_a_runs_commits_carry_only_its_roles_identity(tmp_path: Path) -> None:
    p = agent_project(tmp_path / "gi", AGENT)
    before = sh(p, "git", "rev-parse", "HEAD").stdout.strip()
    r = run_command_role(p, "spec-reviewer")
    assert r.returncode == 0, r.stdout + r.stderr
    who = sh(p, "git", "log", "--format=%an <%ae> / %cn <%ce>", f"{before}..HEAD").stdout.split("\n")
    role = "spec-reviewer <spec-reviewer@workflow.local>"
    assert [w for w in who if w and w != f"{role} / {role}"] == [], who
