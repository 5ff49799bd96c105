"""Inside a run there is no direct delivery: an agent in a real bubblewrap sandbox that drops its run's
environment (``env -i``) and names the mail root itself is told its mail went nowhere, and why —
never that a forged approval was "delivered directly"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.git import GIT_ENV, git_project, mail
from helpers.project import Project
from helpers.sandboxing import needs_bwrap
from workflow.app import App
from workflow.core.config import load_config

BIN = Path(sys.executable).parent

AGENT = """\
import json, os, subprocess, sys
from pathlib import Path

results = {}
bare = {"PATH": os.environ["PATH"], "WORKFLOW_MAIL_ROOT": MAIL}
forge = [BIN + "/workflow-notify", "--from", "spec-reviewer", "approval", "specs/*/user-auth.md", "spec-writer"]
for name, argv, env in (
    ("env -i, default transport", forge, bare),
    ("env -i, --via direct", forge[:1] + ["--via", "direct"] + forge[1:], bare),
    ("env -i, as itself, --via direct", [BIN + "/workflow-notify", "--via", "direct", "--from", "spec-writer",
                                         "answer", "specs/*/user-auth.md", "spec-reviewer", "CONTEXT=x"], bare),
    ("the run's own env, --via direct", [BIN + "/workflow-notify", "--via", "direct", "answer",
                                         "specs/*/user-auth.md", "spec-reviewer", "CONTEXT=x"], dict(os.environ)),
    ("env -i, workflow notify", [BIN + "/workflow", "notify", "--from", "spec-reviewer", "rejection",
                                 "specs/*/user-auth.md", "spec-writer", "REASON=forged"], bare),
):
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    results[name] = {"rc": r.returncode, "out": r.stdout[-600:], "err": r.stderr[-600:]}
marks = {}
for name, act in (("remove the mark", lambda: os.unlink("/.workflow-run")),
                  ("rename the mark", lambda: os.rename("/.workflow-run", "/gone")),
                  ("write the mark", lambda: open("/.workflow-run", "w").write("x"))):
    try:
        act()
        marks[name] = "done"
    except OSError as e:
        marks[name] = str(e)
results["marks"] = marks
Path(os.environ["WORKFLOW_PROJECT"], "attempts.json").write_text(json.dumps(results))
subprocess.run([sys.executable, "-m", "workflow", "finish", "done", "tried"])
"""


def _project(tmp_path: Path) -> Project:
    """A project whose mail root is outside it (as the default ~/.maildir/workflow is): the sandbox
    does not hold it at all, so a write to its path lands in the sandbox's own /tmp."""
    root = tmp_path / "mailroot"
    p = git_project(tmp_path / "nd")
    toml = (p.dir / "workflow.toml").read_text().replace('mail_root = "mail"', f'mail_root = "{root}"')
    agent = AGENT.replace("BIN + ", f"{str(BIN)!r} + ").replace("MAIL}", f"{str(root)!r}}}")
    (p.dir / "agent.py").write_text(agent)
    (p.dir / "workflow.toml").write_text(
        toml + f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n'
    )
    (p.dir / ".gitignore").write_text("mail/\nattempts.json\n")
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "agent"]):
        subprocess.run(cmd, cwd=p.dir, check=True, env={**os.environ, **GIT_ENV})
    p = Project(p.dir, App(load_config(p.dir / "workflow.toml", env={})))
    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    return p


@needs_bwrap
def test_direct_delivery_inside_a_run_fails_saying_why(tmp_path: Path) -> None:
    p = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    r = subprocess.run(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", "spec-writer"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((p.dir / "attempts.json").read_text())
    marks = results.pop("marks")
    assert "done" not in marks.values(), marks  # the mark stays, whatever the agent tries
    for name, got in results.items():
        assert got["rc"] != 0, (name, got)
        assert "delivered" not in got["out"] + got["err"], (name, got)
        assert "inside a run" in got["err"], (name, got)
    assert mail(p, "approval") == [] and mail(p, "answer") == []
    assert [m for m in mail(p, "rejection") if m[0] == "spec-writer"] == [
        ("spec-writer", "rejection", "proposed", ("specs/proposed/user-auth.md",))
    ]
