"""An agent's git identity is its role's only by the environment run-role gives it: the agent sets
GIT_AUTHOR_* and GIT_COMMITTER_* itself (the owner's name and address are in ~/.gitconfig, which
the sandbox lets it read by default) and its successful run keeps a commit that says a person
approved the spec, committed by the owner — `workflow doctor` says nothing of who made it."""

from __future__ import annotations

from pathlib import Path

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
def test_a_run_whose_commits_carry_another_identity_fails_and_its_move_is_undone(tmp_path: Path) -> None:
    """Found by a hostile tester: a run's agent kept a commit authored as a person's role and
    committed as the owner. Now such a run fails; its rollback undoes what the commits did (the
    forged commits themselves stay in the history, beside the role's commit that undoes them)."""
    p = agent_project(tmp_path / "gi", AGENT)
    before = sh(p, "git", "rev-parse", "HEAD").stdout.strip()
    r = run_command_role(p, "spec-reviewer")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the run made commits as someone else" in r.stdout and "user <user@workflow.local>" in r.stdout, r.stdout
    assert (p.dir / "specs" / "proposed" / "user-auth.md").exists()
    assert not (p.dir / "specs" / "todo" / "user-auth.md").exists()
    tree = sh(p, "git", "ls-tree", "-r", "--name-only", "HEAD", "specs").stdout.split()
    assert "specs/proposed/user-auth.md" in tree and "specs/todo/user-auth.md" not in tree
    assert sh(p, "git", "status", "--porcelain", "--", "specs").stdout == ""
    last = sh(p, "git", "log", "-1", "--format=%an <%ae>", "HEAD").stdout.strip()
    assert (
        last == "spec-reviewer <spec-reviewer@workflow.local>"
        and before != sh(p, "git", "rev-parse", "HEAD").stdout.strip()
    )
