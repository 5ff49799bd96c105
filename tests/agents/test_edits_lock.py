"""A shell agent's run reads the artifact roots under the project's git lock: another run's move
renames the artifact and commits it under that lock, and seen half done (renamed, not yet
committed) it looked like this run's move by hand. Issue 48's pipeline on Claude Code: test-writer's
run ended while the implementer moved the skeleton todo → doing; the run failed ("moved … by hand")
and its rollback put the implementer's committed move back, so the pipeline stopped short of done."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from helpers.git import GIT_ENV, git_project
from workflow.agents.txn import Run
from workflow.artifacts.edits import Changed
from workflow.artifacts.gitlock import project_lock


def test_another_runs_move_half_done_is_never_a_shell_runs_edit(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    config = p.app.config
    run = Run.begin(config.state, "test-writer", [], config, shell=True)
    found: list[Changed] = []
    reader = threading.Thread(target=lambda: found.append(run.edits(config)))
    with project_lock(config) as held:  # another run's move_artifact: renamed, then committed, under the lock
        (p.dir / "specs" / "todo").mkdir(exist_ok=True)
        (p.dir / "specs" / "proposed" / "user-auth.md").rename(p.dir / "specs" / "todo" / "user-auth.md")
        reader.start()
        reader.join(timeout=1.0)  # the run's end reads the roots meanwhile: it waits for the lock
        assert reader.is_alive() and found == [], found
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
        env.update(GIT_ENV, **held)  # its hooks know the lock is held
        for cmd in (
            ["add", "-A", "specs"],
            ["commit", "-q", "-m", "spec-reviewer: approve user-auth (proposed → todo)"],
        ):
            subprocess.run(["git", *cmd], cwd=p.dir, env=env, check=True, capture_output=True, timeout=60)
    reader.join(timeout=30)
    assert found == [Changed([], [])], found  # the move is the other run's, committed: nothing of this run's
    # an edit of the run's own is still its own
    (p.dir / "specs" / "todo" / "user-auth.md").write_text("# User auth\n\nRevised.\n")
    assert run.edits(config).paths == ["specs/todo/user-auth.md"]
