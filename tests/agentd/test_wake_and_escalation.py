"""agentd: every recipient wakes, exactly once; a long run is never doubled; escalation goes elsewhere;
signals and status behave as users expect. Real agentd and run-role processes, real Maildirs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.agentd import Daemon, default_sigint, project, prompts, wait_until
from helpers.git import GIT_ENV, mail
from helpers.runs import script, slow_answer, unread
from workflow.delivery import outbox
from workflow.delivery.notify import NotifyRequest


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    ds: list[Daemon] = []
    yield ds
    for d in ds:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def test_a_message_copied_to_two_roles_wakes_both_at_once_and_one_s_dead_letter_never_blocks_the_other(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    # a long rescan: only the watch may wake them, so "30 s later, on the rescan" would fail this test
    p = project(tmp_path, ["skeleton-writer", "test-writer"], "max_attempts = 1\npause_after = 9\n", rescan=120)
    script(p, "skeleton-writer", [{"fail": "cannot build a skeleton"}])
    script(p, "test-writer", [{"say": "tests written"}])
    d = Daemon(p)
    daemons.append(d)
    t0 = time.monotonic()
    p.send("spec-reviewer", "approval", "specs/*/user-auth.md", "spec-writer", NEXT_ROLES="skeleton-writer,test-writer")
    d.wait_for(lambda: unread(p, "test-writer") == 0 and bool(d.events("dead")), "both roles' runs", timeout=20)
    assert time.monotonic() - t0 < 15
    starts = {e["role"] for e in d.events("started") if "task" in e}
    assert starts == {"skeleton-writer", "test-writer"}
    assert len(prompts(p, "test-writer")) == 1 and unread(p, "skeleton-writer") == 1
    # the dead letter stays dead for skeleton-writer only; a rescan does not wake test-writer again
    d.stop()
    assert len(prompts(p, "test-writer")) == 1


def test_a_run_longer_than_lock_ttl_is_not_run_twice_when_agentd_restarts(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    p = project(tmp_path, ["spec-reviewer"], "lock_ttl = 1\n")
    script(p, "spec-reviewer", slow_answer(4.5))
    d = Daemon(p)
    daemons.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: len(prompts(p, "spec-reviewer")) == 1, "the run to start")
    d.proc.kill()
    d.proc.wait()
    time.sleep(1.5)  # the lock is now older than lock_ttl, and its holder is alive
    d2 = Daemon(p)
    daemons.append(d2)
    d2.wait_for(lambda: unread(p, "spec-reviewer") == 0 and len(mail(p, "answer")) == 1 and d2.idle(), "the run to end")
    time.sleep(1.2)  # a rescan later: nothing runs it again
    d2.stop()
    assert len(prompts(p, "spec-reviewer")) == 1 and len(mail(p, "answer")) == 1
    assert d2.events("adopted")


def test_a_failing_coordinator_escalates_to_the_human_not_to_itself(tmp_path: Path, daemons: list[Daemon]) -> None:
    p = project(tmp_path, ["coordinator"], "max_attempts = 1\npause_after = 5\n")
    script(p, "coordinator", [{"fail": "the coordinator is confused"}])
    d = Daemon(p)
    daemons.append(d)
    p.send("implementer", "question", "specs/*/user-auth.md", "coordinator", QUESTION="who owns this?")
    d.wait_for(lambda: bool(d.events("escalated")), "the escalation")
    time.sleep(2.5)  # a self-escalation would wake the coordinator again meanwhile
    d.stop()
    reports = mail(p, "blocker-report")
    assert [r[0] for r in reports] == ["user"]
    [esc] = d.events("escalated")
    assert esc["role"] == "coordinator" and esc["to"] == "user"
    assert len(prompts(p, "coordinator")) == 1


def test_the_second_ctrl_c_stops_agentd_at_once_and_the_run_is_tried_again_later(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    p = project(tmp_path, ["spec-reviewer"], "grace = 60\n")
    script(p, "spec-reviewer", [{"sleep": 60.0}])
    d = Daemon(p)
    daemons.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: len(prompts(p, "spec-reviewer")) == 1, "the run to start")
    d.proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert d.proc.poll() is None  # the first waits for the run (grace 60 s)
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGINT)
    d.proc.wait(timeout=20)
    assert time.monotonic() - t0 < 10
    assert d.events("requeued") and unread(p, "spec-reviewer") == 1
    assert not (p.mail / ".workflow" / "locks" / "spec-reviewer.lock").exists()


def test_agentd_status_says_whether_the_daemon_runs(tmp_path: Path, daemons: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer"])
    r = p.run("agentd", "status")
    assert r.returncode == 3 and "agentd: not running" in r.stdout
    d = Daemon(p)
    daemons.append(d)
    r = p.run("agentd", "status")
    assert r.returncode == 0 and f"agentd: running (pid {d.proc.pid}" in r.stdout
    second = p.run("agentd", "run")
    assert second.returncode != 0 and "agentd is already running" in second.stderr
    d.stop()
    assert p.run("agentd", "status").returncode == 3


def test_ctrl_c_exits_130(tmp_path: Path) -> None:
    p = project(tmp_path, ["spec-reviewer"])
    script(p, "spec-reviewer", [{"sleep": 30.0}])
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV}
    for args in (["run-role", "--with-email", "spec-reviewer"], ["demo", "--dir", str(tmp_path / "demo")]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "workflow", *args],
            cwd=p.dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        wait_until(lambda: (p.dir / "prompts").is_dir() or (tmp_path / "demo" / "mail").is_dir(), "it to start")
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (args, out[-500:], err[-500:])
        assert "Aborted!" not in err
    assert unread(p, "spec-reviewer") == 1


def test_mail_a_run_left_in_the_outbox_is_sent_on_the_next_rescan(tmp_path: Path, daemons: list[Daemon]) -> None:
    # A run commits while the server would not take its mail: the mail waits in the outbox, and
    # agentd's rescan sends it (no git commit or `workflow doctor` needed).
    p = project(tmp_path, ["spec-reviewer"], rescan=0.3)
    c = p.app.compose(
        NotifyRequest("answer", ("specs/*/user-auth.md",), ("user",), "spec-writer", None, {"CONTEXT": "ok"})
    )
    outbox.put(p.app.config, c.raw, "spec-writer@workflow.local", ["user@workflow.local"], "answer", "421 busy")
    d = Daemon(p)
    daemons.append(d)
    # agentd says what it sent after the outbox is empty, so wait on what it says, not on the file.
    d.wait_for(lambda: bool(d.events("outbox")), "agentd to say it sent the outbox")
    assert [(e["sent"], e["left"]) for e in d.events("outbox")] == [(1, 0)]
    assert not outbox.pending(p.app.config)
    assert [m[:2] for m in mail(p, "answer")] == [("user", "answer")]


DIE_IN_COMMIT = """
import json, os
from pathlib import Path
from workflow.agents import locks
from workflow.agents.runrole import new_mail
from workflow.agents.txn import Run
from workflow.app import App
from workflow.core.config import load_config

app = App(load_config(Path("workflow.toml"), env={}))
rows = new_mail(app, app.roster.roles["spec-reviewer"], None)
assert rows and locks.acquire(app.config.state.lock("spec-reviewer"), 600)
run = Run.begin(app.config.state, "spec-reviewer", rows)
info = json.loads((run.dir / "run.json").read_text())
(run.dir / "run.json").write_text(json.dumps({**info, "state": "committing"}))
for r in rows:
    app.maildirs.mark_seen(r.mailbox, r.key)
os.kill(os.getpid(), 9)  # after its mail was marked read, before its directory and lock were removed
"""


def test_a_run_killed_late_in_its_commit_is_finished_and_leaves_no_lock_or_run_behind(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    p = project(tmp_path, ["spec-reviewer"], rescan=0.3)
    script(p, "spec-reviewer", [{"say": "reviewed"}])
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    r = subprocess.run([sys.executable, "-c", DIE_IN_COMMIT], cwd=p.dir, env=env, capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    state = p.app.config.state
    assert (state.runs / "spec-reviewer.run").is_dir() and state.lock("spec-reviewer").exists()
    assert unread(p, "spec-reviewer") == 0  # nothing would wake the role again
    d = Daemon(p)
    daemons.append(d)
    d.wait_for(lambda: not (state.runs / "spec-reviewer.run").exists(), "the crashed run to be finished")
    d.wait_for(lambda: d.idle() and not state.lock("spec-reviewer").exists(), "the lock to go")
    logs = "".join(f.read_text() for f in state.runs.glob("task-*.log"))
    assert "finishing the commit of a run that ended before it was done" in logs, logs
    assert prompts(p, "spec-reviewer") == []  # its mail was handled: no new session
