"""The tool server against an agent that swaps folders for symlinks while it calls: a shell agent in
a real bubblewrap sandbox exchanges a folder under specs/todo/ with a symlink to the owner's
folders (``renameat2(RENAME_EXCHANGE)`` in a loop, from a second process) and meanwhile reads and
writes through the tool server, which runs as the owner outside the sandbox. Nothing outside the
project is read or written: the owner's secret is in no answer, the owner's settings are as they
were, and no refusal tells the agent whether an owner's file exists."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from helpers.git import git_project, sh
from helpers.project import Project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

SECRET = "OWNER-SECRET-5f1e"
SETTINGS = '{"owner": "settings"}\n'
CALLS = 200
SWAPS = 10_000

SWAPPER = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = b"specs/todo/d", b"specs/todo/link"
n = 0
while n < MIN or not os.path.exists("stop"):
    if libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        n += 1
if os.path.islink("specs/todo/d"):  # leave the folder where it was
    libc.renameat2(-100, a, -100, b, 2)
    n += 1
open("swaps", "w").write(str(n))
"""

AGENT = """\
import json, os, subprocess, sys
from pathlib import Path
from workflow.agents.toolwire import call as ask
sys.stdin.read()
victim, calls = sys.argv[1], int(sys.argv[2])
Path("specs/todo/d").mkdir(parents=True)
Path("specs/todo/d/credentials").write_text("the agent's own\\n")
os.symlink(victim, "specs/todo/link")
Path("swapper.py").write_text(SWAPPER)
swapper = subprocess.Popen([sys.executable, "-I", "swapper.py"])
answers = []
for i in range(calls):
    if i % 2:
        a = ask(os.environ["WORKFLOW_TOOLS"], "write_artifact", {"path": "specs/todo/d/settings.json", "content": "HOOK"})
    else:
        a = ask(os.environ["WORKFLOW_TOOLS"], "read_artifact", {"path": "specs/todo/d/credentials"})
    answers.append(a)
Path("stop").write_text("")
swapper.wait()
# what the owner's files would answer if they were looked at: the same refusal as a missing file
probes = {}
for path in ("specs/../../owner/.config/workflow/credentials", "specs/todo/link/credentials",
             "specs/todo/link/none", "specs/todo/none", "specs/../../nowhere/x"):
    probes[path] = ask(os.environ["WORKFLOW_TOOLS"], "read_artifact", {"path": path})
Path("answers.json").write_text(json.dumps({"answers": answers, "probes": probes}))
ask(os.environ["WORKFLOW_TOOLS"], "finish", {"status": "failed", "summary": "raced"})
"""


def racing_project(tmp_path: Path) -> tuple[Project, Path]:
    p = git_project(tmp_path / "race")
    owner = tmp_path / "owner" / ".config" / "workflow"  # the owner's folder, outside the project
    owner.mkdir(parents=True)
    (owner / "credentials").write_text(SECRET + "\n")
    (owner / "settings.json").write_text(SETTINGS)
    (p.dir / "agent.py").write_text(AGENT.replace("SWAPPER", repr(SWAPPER.replace("MIN", str(SWAPS)))))
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py", "{owner}", "{CALLS}"]\ntimeout = 120\n')
    (p.dir / ".gitignore").write_text("mail/\nanswers.json\nswaps\nstop\nswapper.py\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p, owner


@needs_bwrap
def test_ten_thousand_swaps_against_two_hundred_tool_calls_reach_nothing_outside_the_project(tmp_path: Path) -> None:
    """Found by a hostile tester: within about 4 s the tool server returned the owner's secret and
    wrote the owner's settings.json (a SessionStart hook): the path was checked with realpath,
    then opened by name."""
    p, owner = racing_project(tmp_path)
    r = run_command_role(p, "spec-reviewer")
    assert "finished its run as failed: raced" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    swaps = int((p.dir / "swaps").read_text())
    assert swaps >= SWAPS
    said = json.loads((p.dir / "answers.json").read_text())
    answers = said["answers"]
    assert len(answers) == CALLS
    leaked = [a for a in answers if SECRET in json.dumps(a)]
    assert not leaked, f"{len(leaked)} of {CALLS} calls returned the owner's secret"
    assert (owner / "settings.json").read_text() == SETTINGS
    assert sorted(x.name for x in owner.iterdir()) == ["credentials", "settings.json"]
    reads = [a for a in answers[0::2] if a["ok"]]
    assert reads and all("the agent's own" in a["text"] for a in reads)  # the race costs the agent nothing real
    # one answer for every refusal: an owner's file that exists is told apart from none that does not
    refusals = {path: a["text"].replace(path, "PATH") for path, a in said["probes"].items()}
    assert not any(a["ok"] for a in said["probes"].values()), said["probes"]
    by_kind = {
        "dotdot": {refusals[k] for k in refusals if ".." in k},
        "beyond a link or missing": {refusals[k] for k in refusals if ".." not in k},
    }
    assert all(len(v) == 1 for v in by_kind.values()), by_kind
    assert not os.path.lexists(p.dir / "specs" / "todo" / "d" / "settings.json")  # the failed run's write, put back
