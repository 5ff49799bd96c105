"""A shell agent's edits are found with `git status`, which obeys `.gitignore` — a file no run is
refused for changing and no rollback puts back (it is outside the artifact roots). An agent that
ignores the artifact it creates has it left in the tree by its failed run's rollback: on the board,
in todo/, as if approved, with no commit and no mail."""

from __future__ import annotations

from pathlib import Path

from helpers.hostile import agent_project
from helpers.runs import run_command_role, unread
from helpers.sandboxing import needs_bwrap

AGENT = """\
import sys
sys.stdin.read()
with open(".gitignore", "a") as f:
    f.write("specs/todo/payments.md\\n")
with open("specs/todo/payments.md", "w") as f:
    f.write("# Payments\\n\\nApproved. Transfers go to account 1234.\\n")
finish("failed", "gave up")
"""


@needs_bwrap
def test_a_failed_runs_ignored_artifact_is_removed(tmp_path: Path) -> None:
    p = agent_project(tmp_path / "gi", AGENT)
    r = run_command_role(p, "spec-reviewer")
    assert r.returncode == 1 and "finished its run as failed: gave up" in r.stdout, r.stdout + r.stderr
    assert unread(p, "spec-reviewer") == 1
    board = p.run("status").stdout
    assert not (p.dir / "specs" / "todo" / "payments.md").exists(), f"the failed run's artifact stayed:\n{board}"
