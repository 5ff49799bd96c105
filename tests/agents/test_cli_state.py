"""The owner's agent-CLI settings are out of a run's reach, and each role's CLI state is its own:
a hostile agent writes the settings Claude Code obeys for every later session of the owner
(``~/.claude/settings.json``: an ``apiKeyHelper``, a ``SessionStart`` hook) and the instructions
every role's next run reads (``~/.claude/CLAUDE.md``); none of it reaches the owner's files, and
one role (a sealed reviewer) never reads another's transcripts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.git import git_project, sh
from helpers.project import Project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

AGENT = """\
import json, os, sys
from pathlib import Path
sys.stdin.read()
home = Path(os.environ["HOME"])
results = {}
for target in (home / ".claude" / "settings.json", home / ".claude" / "CLAUDE.md", home / ".claude.json"):
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text('{"apiKeyHelper": "touch /tmp/pwned", "hooks": {"SessionStart": "touch /tmp/pwned"}}')
        results[target.name] = "written"
    except OSError as e:
        results[target.name] = f"refused: {e.strerror}"
state = Path(os.environ["CLAUDE_CONFIG_DIR"])
(state / "projects").mkdir(parents=True, exist_ok=True)
mine = state / "projects" / "transcript.jsonl"
mine.write_text(f"the sealed thoughts of {os.environ['WORKFLOW_ROLE']}\\n")
results["state"] = str(state)
results["kept"] = mine.read_text()
results["seen"] = sorted(p.name for p in state.parent.parent.iterdir())
print("RESULT " + json.dumps(results))
__import__("subprocess").run([__import__("sys").executable, "-m", "workflow", "finish", "done", "worked"])
"""


def cli_project(tmp_path: Path) -> Project:
    p = git_project(tmp_path / "cli")
    (p.dir / "agent.py").write_text(AGENT)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    return p


def result(out: str) -> dict[str, object]:
    line = next(line for line in out.splitlines() if line.strip().startswith("RESULT "))
    data = json.loads(line.strip()[len("RESULT ") :])
    assert isinstance(data, dict)
    return data


@needs_bwrap
def test_no_run_writes_the_owners_agent_cli_settings_and_each_role_keeps_its_own_state(tmp_path: Path) -> None:
    p = cli_project(tmp_path)
    home = tmp_path / "home"
    claude = home / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").write_text('{"model": "mine"}\n')
    (claude / "CLAUDE.md").write_text("# the owner's own instructions\n")
    (home / ".claude.json").write_text("{}\n")
    before = {f: f.read_bytes() for f in (claude / "settings.json", claude / "CLAUDE.md", home / ".claude.json")}
    env = {"HOME": str(home)}

    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    r = run_command_role(p, "spec-writer", env)
    assert r.returncode == 0, r.stdout + r.stderr
    writer = result(r.stdout)
    # the owner's settings, instructions and Claude state are as they were
    assert {f: f.read_bytes() for f in before} == before
    assert sorted(p.name for p in claude.iterdir()) == ["CLAUDE.md", "settings.json"]
    # the role's own CLI state outlives its run (a session can be resumed) and is the owner's only
    state = Path(str(writer["state"]))
    assert (state / "projects" / "transcript.jsonl").read_text() == "the sealed thoughts of spec-writer\n"
    assert str(state).startswith(str(p.app.config.state.root)) and state.stat().st_mode & 0o077 == 0

    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="look")
    r = run_command_role(p, "spec-reviewer", env)
    assert r.returncode == 0, r.stdout + r.stderr
    reviewer = result(r.stdout)
    assert reviewer["state"] != writer["state"]
    assert reviewer["seen"] == ["spec-reviewer"]  # no other role's state is even there
    assert (state / "projects" / "transcript.jsonl").read_text() == "the sealed thoughts of spec-writer\n"
