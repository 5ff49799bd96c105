"""agentd against real processes and real Maildirs: seed 001's test plan (lock, no double spawn,
batching, stale locks), a SIGKILL crash, loops, budgets, failures and a clean SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.agentd import Daemon, project, prompts
from helpers.git import GIT_ENV, mail
from helpers.runs import script, slow_answer, unread
from workflow.agents import locks


@pytest.fixture
def cleanup() -> list[Daemon]:
    daemons: list[Daemon] = []
    yield daemons
    for d in daemons:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def test_three_messages_together_make_one_run_that_sees_all_three(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer"])
    script(p, "spec-reviewer", [{"say": "reviewed"}])
    d = Daemon(p)
    cleanup.append(d)
    # "together": while a person's run-role holds the role, so no run starts between two sends
    held = locks.acquire(p.app.config.state.lock("spec-reviewer"), 600)
    assert held is not None
    mids = [p.send("spec-writer", "answer", "specs/*/user-auth.md", "spec-reviewer", CONTEXT=f"a{i}") for i in range(3)]
    d.wait_for(lambda: bool(d.events("coalesced")) or len(d.events("queued")) > 1, "the mail to be queued")
    locks.release(held)
    d.wait_for(lambda: unread(p, "spec-reviewer") == 0 and d.idle(), "the batch to be processed")
    time.sleep(1.5)  # a while later: still nothing more
    d.stop()
    runs = prompts(p, "spec-reviewer")
    assert len(runs) == 1, [e for e in d.events() if e["event"] in ("started", "skipped", "completed")]
    assert all(m in runs[0] for m in mids)
    assert len(d.events("started")) - 1 <= 2  # the agentd "started" line, then at most two spawns
    assert not (p.app.config.mail_root / ".workflow" / "locks" / "spec-reviewer.lock").exists()


def test_mail_during_a_run_makes_exactly_one_more_run(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer"])
    script(p, "spec-reviewer", [{"sleep": 1.5}, {"say": "done"}])
    d = Daemon(p)
    cleanup.append(d)
    first = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: (p.dir / "prompts").is_dir() and len(prompts(p, "spec-reviewer")) == 1, "the first run")
    second = p.send("spec-writer", "answer", "specs/*/user-auth.md", "spec-reviewer", CONTEXT="meanwhile")
    third = p.send("spec-writer", "answer", "specs/*/user-auth.md", "spec-reviewer", CONTEXT="and this")
    d.wait_for(lambda: unread(p, "spec-reviewer") == 0 and d.idle(), "both runs")
    time.sleep(1.5)
    d.stop()
    runs = prompts(p, "spec-reviewer")
    assert len(runs) == 2
    assert first in runs[0] and second not in runs[0]
    assert second in runs[1] and third in runs[1] and "NEW review-request" not in runs[1]


def test_a_live_lock_means_no_second_run_and_a_stale_lock_is_cleared(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer", "spec-writer"])
    script(p, "spec-reviewer", [{"say": "ok"}])
    script(p, "spec-writer", [{"say": "ok"}])
    locks = p.app.config.mail_root / ".workflow" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(["sleep", "3"])
    (locks / "spec-reviewer.lock").write_text(
        json.dumps({"pid": holder.pid, "host": os.uname().nodename, "started": time.time()})
    )
    (locks / "spec-writer.lock").write_text(
        json.dumps({"pid": 999_999, "host": os.uname().nodename, "started": time.time()})
    )
    d = Daemon(p)
    cleanup.append(d)
    assert any(e["event"] == "stale-lock" and e["role"] == "spec-writer" for e in d.events())
    p.send("spec-reviewer", "question", "specs/*/user-auth.md", "spec-writer", QUESTION="q")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: len(prompts(p, "spec-writer")) == 1, "spec-writer (stale lock cleared) to run")
    time.sleep(1.0)
    assert prompts(p, "spec-reviewer") == []  # held by a live process: no run yet
    holder.wait()
    d.wait_for(
        lambda: len(prompts(p, "spec-reviewer")) == 1 and d.idle(), "spec-reviewer to run once the holder is gone"
    )
    d.stop()
    assert len(prompts(p, "spec-reviewer")) == 1


def test_sigkilled_agentd_restarted_mid_run_completes_the_work_exactly_once(
    tmp_path: Path, cleanup: list[Daemon]
) -> None:
    p = project(tmp_path, ["spec-reviewer"])
    script(p, "spec-reviewer", slow_answer(2.0))
    d = Daemon(p)
    cleanup.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: len(d.events("started")) >= 2, "the run to start")
    d.proc.kill()
    d.proc.wait()
    d2 = Daemon(p)
    cleanup.append(d2)
    assert d2.events("adopted"), "the restarted agentd adopts the run still at work instead of starting it again"
    d2.wait_for(
        lambda: unread(p, "spec-reviewer") == 0 and d2.idle() and len(mail(p, "answer")) >= 1, "the work to finish"
    )
    time.sleep(1.5)
    d2.stop()
    assert len(prompts(p, "spec-reviewer")) == 1
    assert len(mail(p, "answer")) == 1


def test_two_roles_answering_each_other_forever_are_stopped_and_escalated_once(
    tmp_path: Path, cleanup: list[Daemon]
) -> None:
    p = project(tmp_path, ["spec-reviewer", "spec-writer", "coordinator"], "repeat_limit = 3\nrepeat_window = 600\n")
    script(
        p,
        "spec-reviewer",
        [
            {
                "tool": "send_message",
                "event": "question",
                "artifact": "specs/*/user-auth.md",
                "to": ["spec-writer"],
                "in_reply_to": "$last",
                "variables": {"QUESTION": "and?"},
            }
        ],
    )
    script(
        p,
        "spec-writer",
        [
            {
                "tool": "send_message",
                "event": "answer",
                "artifact": "specs/*/user-auth.md",
                "to": ["spec-reviewer"],
                "in_reply_to": "$last",
                "variables": {"CONTEXT": "because"},
            }
        ],
    )
    script(p, "coordinator", [{"say": "noted"}])
    d = Daemon(p)
    cleanup.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: bool(d.events("loop")), "loop detection", timeout=60)
    d.wait_for(d.idle, "the loop to quiet down")
    time.sleep(2.5)  # two rescans: nothing restarts it
    d.stop()
    escalations = [m for m in mail(p, "blocker-report") if m[0] == "coordinator"]
    assert len(escalations) == 1
    assert len(d.events("loop")) == 1
    assert len(mail(p, "question")) <= 4 and len(mail(p, "answer")) <= 4


def test_a_role_over_its_token_budget_is_paused_and_escalated(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer"], "daily_tokens = 1000\n")
    script(p, "spec-reviewer", [{"usage": {"input_tokens": 900, "output_tokens": 300}}, {"say": "expensive"}])
    d = Daemon(p)
    cleanup.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: bool(d.events("paused")), "the budget pause")
    p.send("spec-writer", "answer", "specs/*/user-auth.md", "spec-reviewer", CONTEXT="more")
    time.sleep(2.0)
    assert len(prompts(p, "spec-reviewer")) == 1  # paused: the new mail waits
    r = p.run("agentd", "status")
    assert "over its daily token budget: 1200 > 1000" in r.stdout and "tokens today: spec-reviewer 1200" in r.stdout
    r = p.run("agentd", "resume", "spec-reviewer")
    assert r.returncode == 0 and "resumed" in r.stdout
    d.wait_for(lambda: len(prompts(p, "spec-reviewer")) == 2, "the run after resume")
    d.stop()
    assert [m[0] for m in mail(p, "blocker-report")].count("coordinator") >= 1


def test_timeouts_retry_with_backoff_then_dead_letter_escalate_and_pause(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(
        tmp_path,
        ["spec-reviewer"],
        "max_attempts = 2\nretry_backoff = 0.2\npause_after = 2\nrole_timeouts = { spec-reviewer = 1 }\n",
    )
    script(p, "spec-reviewer", [{"sleep": 30}])
    d = Daemon(p)
    cleanup.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: bool(d.events("dead")), "the dead letter", timeout=40)
    d.wait_for(lambda: bool(d.events("paused")), "the pause")
    d.stop()
    retries = d.events("retry")
    # the run's own clock (the scripted step) or agentd's kill, whichever comes first
    assert len(retries) == 1 and re.search(r"timed out after 1s|the run's time is up", str(retries[0]["error"]))
    assert unread(p, "spec-reviewer") == 1  # never processed: still unread
    reports = [m for m in mail(p, "blocker-report") if m[0] == "coordinator"]
    assert len(reports) == 1
    r = p.run("agentd", "status", "--json")
    s = json.loads(r.stdout)
    assert "spec-reviewer" in s["paused"] and s["recent_failures"][0]["dead"] is True
    r = p.run("agentd", "requeue", str(s["recent_failures"][0]["task"]))
    assert r.returncode == 0 and "queued" in r.stdout


def test_sigterm_stops_taking_work_and_requeues_the_unfinished(tmp_path: Path, cleanup: list[Daemon]) -> None:
    p = project(tmp_path, ["spec-reviewer"], "grace = 0.5\n")
    script(p, "spec-reviewer", [{"sleep": 30}])
    d = Daemon(p)
    cleanup.append(d)
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    d.wait_for(lambda: len(d.events("started")) >= 2, "the run")
    t0 = time.monotonic()
    d.stop(signal.SIGTERM)
    assert time.monotonic() - t0 < 15
    assert d.proc.returncode == 0
    assert d.events("requeued") and d.events("stopped")
    said = d.out.read_text()  # what it waits for and how long, not a silent wait (issue 48)
    assert "waiting up to 0.5 s ([agentd] grace) for 1 run(s) to finish: spec-reviewer (task" in said, said
    r = p.run("agentd", "status", "--json")
    s = json.loads(r.stdout)
    assert [q["role"] for q in s["queued"]] == ["spec-reviewer"] and s["running"] == []
    assert unread(p, "spec-reviewer") == 1


def test_workflow_up_runs_server_and_agentd_together(tmp_path: Path) -> None:
    import smtplib

    p = project(tmp_path, ["spec-reviewer"])
    script(p, "spec-reviewer", [{"say": "seen"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    log = tmp_path / "up.out"
    with open(log, "ab") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "workflow", "up"], cwd=p.dir, env={**env, **GIT_ENV}, stdout=out, stderr=out
        )
    try:
        port = p.app.config.smtp.port
        end = time.monotonic() + 30
        while True:
            try:
                smtplib.SMTP("127.0.0.1", port, timeout=2).quit()
                break
            except OSError:
                assert time.monotonic() < end, log.read_text()
                time.sleep(0.1)
        r = p.run(
            "--via",
            "smtp",
            "--from",
            "spec-writer",
            "review-request",
            "specs/proposed/user-auth.md",
            "spec-reviewer",
            tool="workflow-notify",
        )
        assert r.returncode == 0, r.stderr
        end = time.monotonic() + 30
        while not prompts(p, "spec-reviewer") or unread(p, "spec-reviewer"):
            assert time.monotonic() < end, log.read_text()
            time.sleep(0.1)
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=60)
    assert up.returncode == 0, log.read_text()
    text = log.read_text()
    assert "listening on 127.0.0.1" in text and "completed  spec-reviewer" in text
    with pytest.raises(OSError):
        smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=2)


def test_task_stores_opened_at_once_on_a_new_file_all_open(tmp_path: Path) -> None:
    """agentd, its status, the cockpit and run-role open the task store at once: the columns a
    newer version adds are added once, and no opener fails."""
    import threading

    from workflow.agentd.tasks import Tasks

    errors: list[Exception] = []
    for round_ in range(5):  # a race: a few fresh files make it show
        path = tmp_path / f"tasks-{round_}.sqlite"
        go = threading.Barrier(6)

        def open_it(path: Path = path, go: threading.Barrier = go) -> None:
            go.wait()
            try:
                with Tasks(path) as t:
                    t.enqueue("r", ["<m@x>"], kind="bridge", ref="slack+a@x")
            except Exception as e:  # what a second opener would die of
                errors.append(e)

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
