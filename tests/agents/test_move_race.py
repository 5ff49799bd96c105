"""A move made by the tool server while the agent swaps the target state folder for a symlink to the
owner's folder: the artifact never lands in the owner's folder, and no commit carries bytes read
from it — the owner's git never renames or reads the path by name (``artifacts.plumbing``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.git import git_project, sh
from helpers.project import Project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

SECRET = "OWNER-SETTINGS-9c2d"
MOVES = 40

AGENT = """\
import json, os, subprocess, sys
from pathlib import Path
from workflow.agents.toolwire import call as ask
sys.stdin.read()
victim, moves = sys.argv[1], int(sys.argv[2])
os.symlink(victim, "specs/link")
Path("swapper.py").write_text('''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while not os.path.exists("stop"):
    if libc.renameat2(-100, b"specs/todo", -100, b"specs/link", 2) == 0:
        n += 1
if os.path.islink("specs/todo"):
    libc.renameat2(-100, b"specs/todo", -100, b"specs/link", 2)
open("swaps", "w").write(str(n))
''')
swapper = subprocess.Popen([sys.executable, "-I", "swapper.py"])
answers = []
for i in range(moves):
    tools = os.environ["WORKFLOW_TOOLS"]
    answers.append(ask(tools, "write_artifact", {"path": f"specs/proposed/settings-{i}.json", "content": "HOOK"}))
    answers.append(ask(tools, "move_artifact", {"artifact": f"specs/proposed/settings-{i}.json", "state": "todo"}))
Path("stop").write_text("")
swapper.wait()
Path("answers.json").write_text(json.dumps(answers))
ask(os.environ["WORKFLOW_TOOLS"], "finish", {"status": "done", "summary": "moved"})
"""


def racing_project(tmp_path: Path) -> tuple[Project, Path]:
    p = git_project(tmp_path / "mv")
    victim = tmp_path / "owner" / ".claude"
    victim.mkdir(parents=True)
    for i in range(MOVES):
        (victim / f"settings-{i}.json").write_text(SECRET + "\n")
    (p.dir / "agent.py").write_text(AGENT)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(
            f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py", "{victim}", "{MOVES}"]\ntimeout = 120\n'
        )
    (p.dir / ".gitignore").write_text("mail/\nanswers.json\nswaps\nstop\nswapper.py\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p, victim


@needs_bwrap
def test_a_move_never_lands_in_or_reads_from_a_folder_swapped_for_a_link(tmp_path: Path) -> None:
    p, victim = racing_project(tmp_path)
    r = run_command_role(p, "spec-reviewer")
    answers = json.loads((p.dir / "answers.json").read_text())
    assert len(answers) == 2 * MOVES, r.stdout[-2000:] + r.stderr[-2000:]
    assert int((p.dir / "swaps").read_text()) > 1000
    assert sorted(x.name for x in victim.iterdir()) == sorted(f"settings-{i}.json" for i in range(MOVES))
    assert all(x.read_text() == SECRET + "\n" for x in victim.iterdir())  # never moved over nor written
    history = sh(p, "git", "log", "--all", "-p", "--format=%H").stdout
    assert SECRET not in history  # no commit carries what the owner's folder holds
    moved = [a for a in answers[1::2] if a["ok"] and a["text"].startswith("moved ")]
    assert moved, answers[:6]  # the race costs honest moves nothing: most of them are made
    for a in moved:
        name = a["text"].split("→ ")[1].split(" ")[0]
        assert (p.dir / name).read_text() == "HOOK" and "HOOK" in sh(p, "git", "show", f"HEAD:{name}").stdout
