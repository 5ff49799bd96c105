"""A run is a transaction, whatever its backend, and nothing an agent starts outlives its run.

The agent here is a real command-backend agent (a Python script) that calls the real
`workflow-notify` and `workflow move`, forks `setsid` children, and is interrupted with real
signals; mail goes through real Maildirs and moves through a real git repository.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.agentd import default_sigint, procs_with, wait_until
from helpers.git import GIT_ENV, git_project, mail
from helpers.project import Project
from helpers.runs import unread
from workflow.agents.contain import choose

NOTIFY = f"[{sys.executable!r}, '-c', 'from workflow.cli.notify import main; main()']"
WORKFLOW = f"[{sys.executable!r}, '-m', 'workflow']"
FINISH = f"subprocess.run({WORKFLOW} + ['finish', 'done', 'worked'], check=True)"  # a run keeps nothing without it
CONTAINED = choose("auto").complete
needs_containment = pytest.mark.skipif(
    not CONTAINED,
    reason="neither bubblewrap nor a writable cgroup v2 hierarchy here (scripts/system-packages installs bubblewrap)",
)


def agent_project(tmp_path: Path, body: str, extra: str = "") -> Project:
    p = git_project(tmp_path / "tx", extra)
    (p.dir / "agent.py").write_text("import json, os, subprocess, sys, time\n" + textwrap.dedent(body))
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    subprocess.run(["git", "add", "agent.py"], cwd=p.dir, check=True, env={**os.environ, **GIT_ENV})
    subprocess.run(["git", "commit", "-qm", "agent"], cwd=p.dir, check=True, env={**os.environ, **GIT_ENV})
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p


def run_role(p: Project, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    return subprocess.Popen(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", *args, "spec-reviewer"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,
    )


def test_a_failed_command_run_delivers_nothing_it_sent_and_reverts_its_move(tmp_path: Path) -> None:
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        subprocess.run({NOTIFY} + ["answer", "specs/*/user-auth.md", "spec-writer", "CONTEXT=looks fine"], check=True)
        subprocess.run({WORKFLOW} + ["move", "user-auth", "todo", "--as", "spec-reviewer", "--notify", "spec-writer"], check=True)
        print("sent and moved, then crashed"); sys.exit(4)
    """,
    )
    r = run_role(p)
    out, _ = r.communicate(timeout=120)
    assert r.returncode == 1, out
    assert "1 message(s) left unread for the next run; 2 queued message(s) not sent" in out
    assert "reverted the move specs/proposed/user-auth.md → specs/todo/user-auth.md" in out
    assert mail(p, "answer") == [] and mail(p, "approval") == []  # neither the answer nor the move's approval
    assert (p.dir / "specs" / "proposed" / "user-auth.md").exists() and not (
        p.dir / "specs" / "todo" / "user-auth.md"
    ).exists()
    log = subprocess.run(["git", "log", "--format=%s", "-2"], cwd=p.dir, capture_output=True, text=True).stdout
    assert log.splitlines()[0].startswith("spec-reviewer: revert approve user-auth (todo → proposed)"), log
    assert unread(p, "spec-reviewer") == 1
    assert not (p.mail / ".workflow" / "runs" / "spec-reviewer.run").exists()


def test_a_successful_command_run_delivers_what_it_sent_once_and_only_when_it_ends(tmp_path: Path) -> None:
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        handed = open(os.environ["WORKFLOW_HANDED"]).read().split()
        r = subprocess.run({NOTIFY} + ["answer", "specs/*/user-auth.md", "spec-writer", "CONTEXT=ok"],
                           capture_output=True, text=True, check=True)
        box = os.path.join(os.environ["WORKFLOW_MAIL_ROOT"], "spec-writer", "new")
        json.dump({{"handed": handed, "mid": r.stdout.strip(), "stored_during_run": len(os.listdir(box)) if os.path.isdir(box) else 0}},
                  open("agent-report.json", "w"))
        {FINISH}
    """,
    )
    r = run_role(p)
    out, _ = r.communicate(timeout=120)
    assert r.returncode == 0, out
    import json

    report = json.loads((p.dir / "agent-report.json").read_text())
    assert len(report["handed"]) == 1 and report["stored_during_run"] == 0  # staged, not delivered, while running
    answers = [f for f in p.new_files("spec-writer") if report["mid"].encode() in f.read_bytes()]
    assert len(answers) == 1 and unread(p, "spec-reviewer") == 0


def test_inside_a_run_mail_is_the_run_role_s(tmp_path: Path) -> None:
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        r = subprocess.run({NOTIFY} + ["--from", "coordinator", "answer", "specs/*/user-auth.md", "spec-writer", "CONTEXT=x"],
                           capture_output=True, text=True)
        if r.returncode != 0:  # refused: the agent says so as it finishes
            subprocess.run({WORKFLOW} + ["finish", "done", r.stderr.strip()], check=True)
    """,
    )
    r = run_role(p)
    out, _ = r.communicate(timeout=120)
    assert r.returncode == 0, out
    assert "inside a run of spec-reviewer, mail and moves are spec-reviewer's, not coordinator's" in out


@needs_containment
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_role_leaves_no_process_no_mail_and_no_lock(tmp_path: Path, sig: int) -> None:
    marker = f"escapee-{os.getpid()}-{sig}"
    late = f"import subprocess, time; time.sleep(2); subprocess.run({NOTIFY} + ['answer', 'specs/*/user-auth.md', 'spec-writer', 'CONTEXT=too late'])"
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        if os.fork() == 0:
            os.setsid()  # leaves the process group: only the kernel's containment catches it
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", {late!r}, {marker!r}])
            os._exit(0)
        time.sleep(60)
    """,
    )
    started = time.monotonic()  # the escapee starts after this, so it cannot send before started + 2
    r = run_role(p)
    wait_until(lambda: bool(procs_with(marker)), "the escapee")
    r.send_signal(sig)
    out, _ = r.communicate(timeout=60)
    assert r.returncode == 128 + sig, out
    wait_until(lambda: not procs_with(marker), "the escapee to be gone", timeout=5)
    if time.monotonic() >= started + 2:  # it may have reached its send: let a late delivery land
        time.sleep(2.2)
    assert mail(p, "answer") == []
    assert unread(p, "spec-reviewer") == 1
    assert not (p.mail / ".workflow" / "locks" / "spec-reviewer.lock").exists()


@needs_containment
def test_a_timed_out_run_leaves_no_process(tmp_path: Path) -> None:
    marker = f"timeout-escapee-{os.getpid()}"
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", {marker!r}])
            os._exit(0)
        time.sleep(120)
    """,
        "[agentd]\nrole_timeouts = { spec-reviewer = 2 }\n",
    )
    r = run_role(p)
    out, _ = r.communicate(timeout=60)
    assert r.returncode == 1 and "timed out after 2s" in out, out
    wait_until(lambda: not procs_with(marker), "the escapee to be gone", timeout=5)


def test_a_crashed_run_is_rolled_back_by_the_next_run_of_its_role(tmp_path: Path) -> None:
    p = agent_project(
        tmp_path,
        f"""
        prompt = sys.stdin.read()
        if os.path.exists("second"):
            print("second run"); {FINISH}; sys.exit(0)
        subprocess.run({NOTIFY} + ["answer", "specs/*/user-auth.md", "spec-writer", "CONTEXT=first"], check=True)
        open("second", "w").close()
        time.sleep(60)
    """,
    )
    r = run_role(p)
    wait_until(lambda: (p.dir / "second").exists(), "the first run to send its answer")
    r.kill()  # run-role dies by SIGKILL mid-run: no chance to clean up
    r.communicate(timeout=60)
    assert (p.mail / ".workflow" / "runs" / "spec-reviewer.run").exists()  # left open
    r2 = run_role(p)
    out, _ = r2.communicate(timeout=60)
    assert r2.returncode == 0, out
    assert "rolling back a run that ended without succeeding" in out and "1 staged message(s) not sent" in out
    assert mail(p, "answer") == []  # the crashed run's answer was never delivered
    assert unread(p, "spec-reviewer") == 0  # the second run handled the mail


CRASH_WITH_ORPHANS = """
import os, subprocess, sys
from pathlib import Path
from workflow.agents import locks
from workflow.agents.runrole import new_mail
from workflow.agents.txn import Run
from workflow.app import App
from workflow.core.config import load_config

app = App(load_config(Path("workflow.toml"), env={}))
rows = new_mail(app, app.roster.roles["spec-reviewer"], None)
assert locks.acquire(app.config.state.lock("spec-reviewer"), 600)
run = Run.begin(app.config.state, "spec-reviewer", rows)
env = {**os.environ, "WORKFLOW_RUN": str(run.agent)}
sleeper = "import time; time.sleep(120)"
# the agent, started just as its run-role was killed (before anything could tie it to the run-role's life) …
subprocess.Popen([sys.executable, "-c", sleeper, sys.argv[1]], env=env, start_new_session=True)
# … and a child it moved to a session of its own
subprocess.Popen(["setsid", sys.executable, "-c", sleeper, sys.argv[1]], env=env)
def cmdline(d):
    try:
        return open(f"/proc/{d}/cmdline", "rb").read()
    except OSError:  # a process that ended while we listed /proc
        return b""
me = str(os.getpid())  # this script's own command line names the marker too: never counted
while len([d for d in os.listdir("/proc") if d.isdigit() and d != me and sys.argv[1].encode() in cmdline(d)]) < 2:
    pass
os.kill(os.getpid(), 9)
"""


def test_the_next_run_kills_what_a_crashed_run_left_alive_before_its_agent_starts(tmp_path: Path) -> None:
    marker = f"orphan-{os.getpid()}-{time.time_ns()}"
    p = agent_project(
        tmp_path,
        f"""
        sys.stdin.read()
        def cmdline(d):
            try:
                return open(f"/proc/{{d}}/cmdline", "rb").read()
            except OSError:
                return b""
        alive = [d for d in os.listdir("/proc") if d.isdigit() and {marker.encode()!r} in cmdline(d)]
        open("orphans-seen", "w").write(str(len(alive)))
        {FINISH}
    """,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    crash = subprocess.run([sys.executable, "-c", CRASH_WITH_ORPHANS, marker], cwd=p.dir, env=env, timeout=60)
    assert crash.returncode == -signal.SIGKILL
    assert len(procs_with(marker)) == 2
    r = run_role(p)
    out, _ = r.communicate(timeout=60)
    assert r.returncode == 0, out
    assert "killed 2 process(es) the crashed run left" in out, out
    assert (p.dir / "orphans-seen").read_text() == "0"  # gone before the new agent started
    assert not procs_with(marker)
