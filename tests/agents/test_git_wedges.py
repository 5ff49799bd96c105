"""Nothing an agent leaves where git reads wedges a run or the project's git lock: a hostile shell
agent in a real bubblewrap sandbox plants a FIFO where the owner's git would block on it, calls
its run's move_artifact tool (served by run-role outside the sandbox) and exits. run-role ends
within a bounded time, fails the run and rolls it back, and the owner's `workflow move` right
after works. A tool call stuck for whatever reason (the owner's own slow hook) is stopped when the
run ends, with the git lock released."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project, sh
from helpers.project import Project
from helpers.runs import run_command_role, unread
from helpers.sandboxing import needs_bwrap
from workflow.agents.contain import kill_session
from workflow.agents.toolserver import STOP_WAIT

AGENT = """\
import os, subprocess, sys, threading, time
from pathlib import Path
from workflow.agents.toolwire import call as ask  # what `workflow mcp` relays through
sys.stdin.read()
where = Path(sys.argv[1]).read_text().strip()
run = Path(os.environ["WORKFLOW_RUN"])
def git(*a):
    return subprocess.run(["git", *a], check=True, capture_output=True, text=True).stdout.strip()
if where == "gitfile":  # an embedded repository whose git directory is the agent's own, outside the tree
    fake = run / "fake"
    (fake / "objects").mkdir(parents=True)
    (fake / "refs").mkdir()
    os.mkfifo(fake / "HEAD")
    os.makedirs("specs/todo/sub")
    Path("specs/todo/sub/.git").write_text(f"gitdir: {fake}\\n")
    git("update-index", "--add", "--cacheinfo", f"160000,{git('rev-parse', 'HEAD')},specs/todo/sub")
elif where.startswith("hook"):  # the owner's pre-commit hook is slow: the call is stuck in it
    pass
else:
    os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
    if os.path.lexists(where):
        os.unlink(where)
    os.mkfifo(where)
answers = []
caller = threading.Thread(
    target=lambda: answers.append(ask(os.environ["WORKFLOW_TOOLS"], "move_artifact",
                                      {"artifact": "specs/proposed/user-auth.md", "state": "todo"})),
    daemon=True,
)
caller.start()
if not where.startswith("hook"):
    caller.join(5)
    print("move_artifact", answers[0] if answers else "no answer yet", flush=True)
    os._exit(0)  # and gone, its call (if any) still under way
while not Path("hook-started").exists() and not answers:  # the call is in the owner's hook now
    time.sleep(0.05)
print("move_artifact", answers[0] if answers else "in the owner's hook", flush=True)
if where == "hook-stay":  # still at work when run-role is told to stop (agentd's SIGTERM)
    time.sleep(600)
if where == "hook":
    done = lambda: ask(os.environ["WORKFLOW_TOOLS"], "finish", {"status": "done", "summary": "worked"})
    threading.Thread(target=done, daemon=True).start()  # served once the move's call is over, if ever
    time.sleep(0.5)
os._exit(0)  # and gone, its call still under way
"""

SLOW_HOOK = """\
#!/bin/sh
# the owner's: the first commit it sees waits (a hook waiting on the network); later ones do not
if [ ! -e {marker} ]; then touch {marker}; sleep 600; fi
"""


def project(tmp_path: Path) -> Project:
    p = git_project(tmp_path / "w")
    (p.dir / "agent.py").write_text(AGENT)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(
            f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py", "{tmp_path / "where"}"]\ntimeout = 60\n'
        )
    (p.dir / ".gitignore").write_text("mail/\nhook-started\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p


@needs_bwrap
@pytest.mark.parametrize(
    "where",
    [".gitattributes", "specs/proposed/.gitignore", ".mailmap", ".git/refs/heads/side", "gitfile"],
)
def test_a_fifo_where_git_reads_never_wedges_a_run_or_the_projects_git_lock(tmp_path: Path, where: str) -> None:
    """Issue 47, reproduction 6: the tool server's `git mv` blocked on a FIFO .gitattributes holding
    the project's git lock; run-role never ended and every `workflow move` of the owner waited."""
    p = project(tmp_path)
    if where == ".git/refs/heads/side":
        sh(p, "git", "branch", "side")
    (tmp_path / "where").write_text(where)
    t0 = time.monotonic()
    r = run_command_role(p, "spec-reviewer", timeout=30)
    assert time.monotonic() - t0 < 30
    assert r.returncode == 1, r.stdout + r.stderr
    named = "specs/todo/sub" if where == "gitfile" else where
    assert f"{named}" in r.stdout, r.stdout  # the refusal names the file
    assert unread(p, "spec-reviewer") == 1
    assert (p.dir / "specs" / "proposed" / "user-auth.md").is_file()
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer")  # the owner, right after
    assert r.returncode == 0, r.stdout + r.stderr
    assert sh(p, "git", "ls-files", "specs/todo/user-auth.md").stdout.strip() == "specs/todo/user-auth.md"


@needs_bwrap
def test_a_tool_call_stuck_when_its_run_ends_is_stopped_and_the_run_fails(tmp_path: Path) -> None:
    """The call's git (and the owner's hook under it) is stopped when the agent is gone: the run
    fails though the agent said done (its move was cut short), it is rolled back, and the git lock
    is free for the owner's next move."""
    p = project(tmp_path)
    (tmp_path / "where").write_text("hook")
    hook = p.dir / ".git" / "hooks" / "pre-commit"
    ours = hook.read_text()
    hook.write_text(SLOW_HOOK.format(marker=p.dir / "hook-started") + ours.split("\n", 1)[1])
    t0 = time.monotonic()
    r = run_command_role(p, "spec-reviewer", timeout=30)
    assert time.monotonic() - t0 < 30
    assert r.returncode == 1 and "the run has ended" in r.stdout, r.stdout + r.stderr
    assert unread(p, "spec-reviewer") == 1
    assert (p.dir / "specs" / "proposed" / "user-auth.md").is_file()
    assert not (p.dir / "specs" / "todo" / "user-auth.md").exists()
    assert sh(p, "git", "status", "--porcelain", "--", "specs").stdout == ""
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer")
    assert r.returncode == 0, r.stdout + r.stderr


@needs_bwrap
def test_run_role_told_to_stop_with_a_tool_call_stuck_ends_at_once_and_leaves_no_git_behind(tmp_path: Path) -> None:
    """agentd's SIGTERM (its backstop, `agentd stop`) while a tool call is stuck: run-role stops
    the call at once, rolls the run back and exits; nothing it started lives on."""
    p = project(tmp_path)
    (tmp_path / "where").write_text("hook-stay")
    hook = p.dir / ".git" / "hooks" / "pre-commit"
    hook.write_text(SLOW_HOOK.format(marker=p.dir / "hook-started") + hook.read_text().split("\n", 1)[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    argv = [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", "spec-reviewer"]
    proc = subprocess.Popen(
        argv,
        cwd=p.dir,
        env={**env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 30
        while not (p.dir / "hook-started").exists():
            assert time.monotonic() < end and proc.poll() is None, "the call never reached the hook"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGTERM)  # as agentd stops a run
        out, _ = proc.communicate(timeout=3 * STOP_WAIT)
        left = session(proc.pid)
        end = time.monotonic() + 5  # what was signalled with run-role may take a moment to go
        while left and time.monotonic() < end:
            time.sleep(0.02)
            left = session(proc.pid)
    finally:
        kill_session(proc.pid)
    assert proc.returncode != 0, out
    assert left == [], out  # no git, no hook, no agent: nothing outlived run-role
    assert unread(p, "spec-reviewer") == 1
    assert (p.dir / "specs" / "proposed" / "user-auth.md").is_file(), out
    assert not (p.dir / "specs" / "todo" / "user-auth.md").exists(), out
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer")  # the git lock is free
    assert r.returncode == 0, r.stdout + r.stderr


def session(sid: int) -> list[str]:
    """The command lines of the processes still alive in session ``sid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[3] == str(sid) and fields[0] != "Z":
                out.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:80])
        except OSError:
            continue
    return out
