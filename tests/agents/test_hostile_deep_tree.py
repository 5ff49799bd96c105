"""Every owner-side walk of the working tree (the agent files' record, the board's and `locate`'s
scan) is Python's recursive `os.fwalk`: an agent that leaves a folder nested deeper than Python's
recursion limit under an artifact root makes its rollback die with a traceback, every later run of
the role die the same way in its recovery (the run is never set aside), and the owner's `workflow
status` and `workflow move` fail with a RecursionError."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.hostile import agent_project, remove_chain
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

AGENT = """\
import os, sys
sys.stdin.read()
fd = os.open("specs/proposed", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(1000):  # deeper than Python's recursion limit; no path longer than PATH_MAX
    os.mkdir("a", dir_fd=fd)
    fd = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
os.close(os.open("x.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
finish("failed", "gave up")
"""


@needs_bwrap
def test_a_deeply_nested_folder_never_wedges_the_role_or_the_owners_commands(tmp_path: Path) -> None:
    p = agent_project(tmp_path / "dt", AGENT, timeout=60)
    try:
        first = run_command_role(p, "spec-reviewer")
        assert "finished its run as failed: gave up" in first.stdout, first.stdout + first.stderr
        board = p.run("status")
        problems = {
            name: r.stderr.strip().splitlines()[-1]
            for name, r in (("run-role", first), ("workflow status", board))
            if "Traceback" in r.stderr
        }
        assert problems == {}, problems
        assert board.returncode == 0, board.stderr[-300:]
    finally:  # wherever a rollback may have put it (pytest's clean-up of old tmp dirs would choke on it)
        for top, dirs, _ in os.walk(tmp_path):
            if top.count(os.sep) - str(tmp_path).count(os.sep) > 8:
                dirs[:] = []
            for d in [d for d in dirs if d == "a"]:
                remove_chain(Path(top, d))
                dirs.remove(d)
