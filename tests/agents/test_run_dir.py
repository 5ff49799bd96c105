"""A run's directory is untrusted input: what a hostile agent puts in its part of the run (a
symlink for its mail file, a forged move journal, a FIFO) is never followed, obeyed or waited on
by the owner's run-role — with a real command-backend agent in a real bubblewrap sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project, sh
from helpers.project import Project
from helpers.runs import unread
from helpers.sandboxing import needs_bwrap


def agent_project(tmp_path: Path, agent: str, *args: str) -> Project:
    p = git_project(tmp_path / "rd")
    (p.dir / "agent.py").write_text(agent)
    argv = ", ".join(f'"{a}"' for a in (sys.executable, "agent.py", *args))
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f"\n[backends.command]\nargv = [{argv}]\ntimeout = 60\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    return p


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test() -> Iterator[None]:
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:  # a failed test (the old code waited on a FIFO forever): end it
            proc.kill()
            proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def run_role(p: Project, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", *extra, "spec-writer"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    STARTED.append(proc)
    return proc


SYMLINKER = """\
import os, subprocess, sys, time
from pathlib import Path
sys.stdin.read()
mail = Path(os.environ["WORKFLOW_NEW_MAIL"])
mail.unlink()
os.symlink(sys.argv[1], mail)
Path("ready").write_text("")
while not Path("go").exists():
    time.sleep(0.02)
subprocess.run([sys.executable, "-m", "workflow", "finish", "done", "waited"], check=True)
"""


@needs_bwrap
def test_mail_during_a_run_is_never_written_through_a_symlink_the_agent_planted(tmp_path: Path) -> None:
    target = tmp_path / "owner-site-packages" / "evil.pth"
    target.parent.mkdir()
    p = agent_project(tmp_path, SYMLINKER, str(target))
    run = run_role(p, "--email-poll-interval", "0.1")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stdout or []), daemon=True)
    reader.start()
    end = time.monotonic() + 60
    while not (p.dir / "ready").exists():
        assert run.poll() is None and time.monotonic() < end, "".join(lines)
        time.sleep(0.02)
    p.send("user", "question", "specs/proposed/user-auth.md", "spec-writer", QUESTION="still there?")
    while not any("not appended to" in ln for ln in lines):
        assert run.poll() is None and time.monotonic() < end, "".join(lines)
        time.sleep(0.02)
    (p.dir / "go").write_text("")
    run.wait(timeout=60)
    reader.join(timeout=10)
    if run.stdout is not None:
        run.stdout.close()
    assert run.returncode == 0, "".join(lines)
    assert not target.exists()  # nothing of the owner's was written through the link
    assert any("new mail during the run" in ln for ln in lines)


FORGER = """\
import json, os, sys
from pathlib import Path
sys.stdin.read()
run = Path(os.environ["WORKFLOW_RUN"])
entries = [
    {"before": ["specs", "proposed", "../../away/workflow.toml"], "after": ["specs", "todo", "../../workflow.toml"]},
    {"before": ["specs", "todo", "x/../../../../etc/evil/a.md"], "after": ["specs", "done", "a.md"]},
    {"before": ["nope"], "after": 7},
    "not even an object",
]
(run / "moves.jsonl").write_text("\\n".join(json.dumps(e) for e in entries) + "\\n")
if len(sys.argv) > 1:
    (run / "threads.json").unlink(missing_ok=True)
    os.mkfifo(run / "threads.json")
    (run / "moves.jsonl").unlink()
    os.mkfifo(run / "moves.jsonl")
sys.exit(3)
"""


@needs_bwrap
def test_a_forged_move_journal_moves_nothing_and_wedges_nothing(tmp_path: Path) -> None:
    p = agent_project(tmp_path, FORGER)
    head = sh(p, "git", "rev-parse", "HEAD").stdout
    toml = (p.dir / "workflow.toml").read_bytes()
    run = run_role(p)
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 1, out
    assert sh(p, "git", "rev-parse", "HEAD").stdout == head  # no commit: nothing was moved back
    assert (p.dir / "workflow.toml").read_bytes() == toml
    assert not (p.dir / "away").exists() and not Path("/etc/evil").exists()
    assert unread(p, "spec-writer") == 1  # the run failed; its mail waits for the next one


@needs_bwrap
def test_fifos_in_the_run_directory_are_never_waited_on(tmp_path: Path) -> None:
    p = agent_project(tmp_path, FORGER, "fifo")
    run = run_role(p)
    out, _ = run.communicate(timeout=60)  # a FIFO read would block for good
    assert run.returncode == 1, out
    assert not (p.app.config.state.runs / "spec-writer.run").exists()
    # the role is not wedged: its next run goes ahead (and fails again, the same clean way)
    run = run_role(p)
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 1 and "run failed" in out, out


FIFO_ARTIFACT = """\
import os, subprocess, sys
sys.stdin.read()
if not os.path.lexists("specs/todo/user-auth.md"):
    os.mkfifo("specs/todo/user-auth.md")  # the mail's glob specs/*/user-auth.md finds it too
subprocess.run([sys.executable, "-m", "workflow", "finish", "done", "planted"], check=True)
"""


@needs_bwrap
def test_a_fifo_planted_as_an_artifact_never_blocks_the_next_run(tmp_path: Path) -> None:
    """Found by the random-writes property test: the next run's context read the artifact the
    mail names, and opening a FIFO blocks until a writer comes — for good. A FIFO in the tree
    blocks the owner's git too: the run that leaves one fails and it is moved aside; one there
    when a run begins is named, and nothing waits on it."""
    p = agent_project(tmp_path, FIFO_ARTIFACT)
    fifo = p.dir / "specs" / "todo" / "user-auth.md"
    for _ in range(2):  # the role is never wedged: each run fails the same clean way
        run = run_role(p)
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 1 and "Traceback" not in out and "planted specs/todo/user-auth.md" in out, out
        assert not os.path.lexists(fifo)
    os.mkfifo(fifo)  # there before the run begins (the owner's, say)
    run = run_role(p)
    out, _ = run.communicate(timeout=60)  # blocked forever before
    assert run.returncode != 0 and "Traceback" not in out and f"{fifo} is a FIFO" in out, out
