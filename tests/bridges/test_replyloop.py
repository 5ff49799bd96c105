"""Seed 001's reply loop test plan: state detection, thread.md integrity, NEW markers, locks, batching,
no double spawn, stale locks, threading headers — and the loop end to end through a real Dovecot."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from helpers.gmail import PASSWORD, bridge_project, needs_dovecot, run_bridge, spool
from helpers.project import Project
from workflow.bridges.gmail import conversation as cv
from workflow.bridges.gmail import replyloop as rl
from workflow.mail.message import parse


def conv(p: Project) -> Path:
    return cv.start(
        p.app, "<first@workflow.local>", "user", "sam@test.com", "Briefing", "The briefing body.", "2026-11-26 05:00"
    )


def test_state_detection(tmp_path: Path) -> None:
    d = tmp_path / "r"
    assert cv.max_reply(d) == 0 and cv.max_response(d) == 0 and not cv.unprocessed(d)
    d.mkdir()
    (d / "01-reply.md").write_text("x")
    assert cv.max_reply(d) == 1 and cv.unprocessed(d)
    (d / "03-reply.md").write_text("x")
    assert cv.max_reply(d) == 3  # gaps
    (d / "03-response.md").write_text("x")
    assert cv.max_response(d) == 3 and not cv.unprocessed(d)
    (d / "04-reply.md").write_text("x")
    assert cv.unprocessed(d)


def test_thread_order_special_characters_and_new_markers(project: Project) -> None:
    d = conv(project)
    weird = 'He said "ok" `rm -rf` \n## Not a header\n```\ncode\n```\n<b>&amp;</b> émoji ✓'
    assert cv.record_reply(d, "sam@test.com", weird, "<r1@test.com>") == 1
    (d / "responses" / "01-response.md").write_text("answer 1")
    cv.append(d / "thread.md", "Response to Reply #1", "answer 1")
    cv.remove_new_markers(d / "thread.md")
    assert cv.record_reply(d, "sam@test.com", "second", "<r2@test.com>") == 2
    assert cv.record_reply(d, "sam@test.com", "third", "<r3@test.com>") == 3
    assert cv.record_reply(d, "sam@test.com", "third", "<r3@test.com>") == 3  # the same reply again: not twice
    text = (d / "thread.md").read_text()
    order = [
        text.index(s)
        for s in ("## Sent", "## Reply #1", "## Response to Reply #1", "## NEW Reply #2", "## NEW Reply #3")
    ]
    assert order == sorted(order)
    assert weird.rstrip() in text
    cv.remove_new_markers(d / "thread.md")
    after = (d / "thread.md").read_text()
    assert "NEW" not in after and "## Reply #2" in after and "## Reply #3" in after and weird.rstrip() in after
    # thread.md can be rebuilt from the numbered files
    (d / "thread.md").unlink()
    rebuilt = cv.rebuild_thread(d)
    assert "## Reply #1" in rebuilt and "## Response to Reply #1" in rebuilt and "## NEW Reply #3" in rebuilt


def test_concurrent_appends_lose_nothing(project: Project) -> None:
    d = conv(project)
    threads = [
        threading.Thread(target=cv.append, args=(d / "thread.md", f"Section {i}", f"body {i}")) for i in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = (d / "thread.md").read_text()
    assert all(f"## Section {i}\n\nbody {i}\n" in text for i in range(20))


def test_prompt_inlines_the_thread_and_refuses_without_one(project: Project) -> None:
    d = conv(project)
    cv.record_reply(d, "sam@test.com", "Can we move it to 3pm?", "<r1@test.com>")
    text = rl.prompt(project.app, d)
    assert "## NEW Reply #1" in text and "Can we move it to 3pm?" in text and "01-response.md" in text
    (d / "thread.md").unlink()
    from workflow.core.errors import WorkflowError

    with pytest.raises(WorkflowError, match="thread.md is missing"):
        rl.prompt(project.app, d)


def test_lock_no_double_spawn_batching_and_stale_lock(project: Project) -> None:
    d = conv(project)
    spawns: list[int] = []

    def spawn(_: Path) -> int:
        spawns.append(1)
        return os.getpid()  # a live process stands in for the session

    assert not rl.trigger(project.app, d, spawn)  # nothing unprocessed: no lock, no spawn
    assert not rl.lock_path(d).exists()
    for i in range(1, 4):
        cv.record_reply(d, "sam@test.com", f"reply {i}", f"<r{i}@test.com>")
    results = []
    ts = [threading.Thread(target=lambda: results.append(rl.trigger(project.app, d, spawn))) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(results) == [False, True] and len(spawns) == 1  # one lock, one session for three replies
    assert not rl.trigger(project.app, d, spawn)  # lock held by a live process
    # The session answers all three (03-response.md) and drops the lock; a fourth reply spawns once more.
    (d / "responses" / "03-response.md").write_text("all three")
    rl.lock_path(d).unlink()
    assert not cv.unprocessed(d / "responses")
    cv.record_reply(d, "sam@test.com", "reply 4", "<r4@test.com>")
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 2
    # Stale: a lock older than 10 minutes (its process may even be alive) is cleared by the next trigger.
    (d / "responses" / "04-response.md").write_text("x")
    cv.record_reply(d, "sam@test.com", "reply 5", "<r5@test.com>")
    lock = rl.lock_path(d)
    lock.write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": time.time()}))
    os.utime(lock, (time.time() - 15 * 60, time.time() - 15 * 60))  # staleness is the lock's mtime
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 3
    # And a lock whose process is gone is stale at once.
    (d / "responses" / "05-response.md").write_text("x")
    cv.record_reply(d, "sam@test.com", "reply 6", "<r6@test.com>")
    lock.write_text(json.dumps({"pid": 999_999, "host": os.uname().nodename, "started": time.time()}))
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 4


@needs_dovecot
def test_the_loop_end_to_end_through_dovecot(tmp_path: Path, dovecot: object) -> None:
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    p = bridge_project(tmp_path, dovecot, "enabled = false\n")
    (p.dir / "scripted").mkdir()
    (p.dir / "scripted" / "user.toml").write_text('[[step]]\nsay = "3pm works. See you then."\n')
    d = cv.start(p.app, "<brief-1@workflow.local>", "user", "sam@test.com", "Briefing", "Meeting at 2pm.")
    for i, text in enumerate(("Can we do 3pm?", "Also, bring the deck."), 1):
        dovecot.append(
            (
                f"From: sam@test.com\r\nTo: me@example.com\r\nSubject: Re: Briefing\r\nMessage-ID: <sam-{i}@test.com>\r\n"
                f"In-Reply-To: <brief-1@workflow.local>\r\nReferences: <brief-1@workflow.local>\r\n\r\n{text}\r\n"
            ).encode()
        )
    r = run_bridge(p)
    assert r.returncode == 0, r.stderr
    assert "one session spawned" in r.stderr
    end = time.monotonic() + 30
    while not (d / "responses" / "02-response.md").exists() or rl.lock_path(d).exists():
        assert time.monotonic() < end, (
            (d / "responses" / "session.log").read_text() if (d / "responses" / "session.log").exists() else ""
        )
        time.sleep(0.1)
    thread = (d / "thread.md").read_text()
    assert "## Reply #1" in thread and "## Reply #2" in thread and "NEW" not in thread
    assert "## Response to Reply #2\n\n3pm works. See you then." in thread
    (out,) = spool(p)
    m = parse(out)
    assert m.in_reply_to == "<sam-2@test.com>"
    assert m.references == ["<brief-1@workflow.local>", "<sam-1@test.com>", "<sam-2@test.com>"]
    assert m.subject == "Re: Briefing" and "sam@test.com" in m.recipients
    r = run_bridge(p)  # nothing new: no second session
    assert "spawned" not in r.stderr
    assert PASSWORD


@needs_dovecot
def test_a_conversation_of_another_role_than_the_import_role_is_answered(tmp_path: Path, dovecot: object) -> None:
    """spec-writer mailed sam through the bridge, whose imports go to `user`: sam's replies reach
    spec-writer too, so its session may answer them (In-Reply-To a reply it received) and does."""
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    p = bridge_project(tmp_path, dovecot, "enabled = false\n")
    d = cv.start(p.app, "<spec-1@workflow.local>", "spec-writer", "sam@test.com", "Briefing", "When can we meet?")
    dovecot.append(_reply(1, "Thursday?", "<spec-1@workflow.local>", "<spec-1@workflow.local>"))
    r = run_bridge(p)  # imported; the session fails (spec-writer has no script yet) and the reply waits
    assert r.returncode == 0 and "one session spawned" in r.stderr, r.stderr
    end = time.monotonic() + 30
    while rl.lock_path(d).exists():
        assert time.monotonic() < end
        time.sleep(0.1)
    assert p.run("inbox", "user").returncode == 0  # the person reads their inbox: the reply is indexed
    (p.dir / "scripted").mkdir()
    (p.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsay = "Thursday it is."\n')
    r = run_bridge(p)
    assert r.returncode == 0 and "one session spawned" in r.stderr, r.stderr
    _settle(d, 1)
    (out,) = spool(p)
    m = parse(out)
    assert m.sender == "spec-writer@workflow.local" and m.in_reply_to == "<sam-1@test.com>", out
    assert "Thursday it is." in out.decode()
    for role in ("user", "spec-writer"):  # the import role keeps its copy; the conversation's role has one
        assert any(b"<sam-1@test.com>" in f.read_bytes() for f in p.new_files(role)), role
    assert not (d / "responses" / ".failures.json").exists()  # the second session answered


def _reply(i: int, text: str, in_reply_to: str, refs: str = "") -> bytes:
    head = f"In-Reply-To: {in_reply_to}\r\n" + (f"References: {refs}\r\n" if refs else "")
    return (
        f"From: sam@test.com\r\nTo: me@example.com\r\nSubject: Re: Briefing\r\nMessage-ID: <sam-{i}@test.com>\r\n"
        f"Date: Thu, 26 Nov 2026 1{i}:00:00 +0000\r\n{head}\r\n{text}\r\n"
    ).encode()


def _settle(d: Path, n: int) -> None:
    """Wait for the session to write NN-response.md and drop its lock."""
    end = time.monotonic() + 30
    while not (d / "responses" / f"{n:02d}-response.md").exists() or rl.lock_path(d).exists():
        log = d / "responses" / "session.log"
        assert time.monotonic() < end, log.read_text() if log.exists() else "no session log"
        time.sleep(0.1)


def _conversations(p: Project) -> list[Path]:
    base = p.mail / ".workflow" / "conversations"
    return sorted(d for d in base.iterdir() if (d / ".sent").exists())


@needs_dovecot
def test_the_seeds_test_plan_one_conversation_per_thread_end_to_end(
    tmp_path: Path, dovecot: object, provider: tuple[int, list[tuple[str, list[str], bytes]]]
) -> None:
    """001_…'s end-to-end plan through a real Dovecot and a provider's SMTP server: the sent mail
    opens one conversation; responses and replies to responses stay in it (docs/bridges.md)."""
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    port, got = provider
    p = bridge_project(
        tmp_path,
        dovecot,
        "enabled = false\n",
        gmail=f'smtp_host = "127.0.0.1"\nsmtp_port = {port}\nsmtp_tls = "none"\n',
        tail='[backends.scripted]\nrecord_dir = "prompts"\n',
    )
    (p.dir / "scripted").mkdir()
    script = p.dir / "scripted" / "user.toml"
    script.write_text('[[step]]\nsay = "3pm works. See you then."\n[[step]]\nsay = "MEMORY: Sam prefers afternoons"\n')
    # 1. The role's mail goes out and opens a conversation: sent.md, thread.md, .sent.
    r = p.run(
        "--from",
        "user",
        "question",
        "specs/*/brief.md",
        "sam@test.com",
        "QUESTION=Meeting at 2pm?",
        tool="workflow-notify",
    )
    assert r.returncode == 0, r.stderr
    first = r.stdout.strip()
    r = run_bridge(p)
    assert r.returncode == 0, r.stderr
    (d,) = _conversations(p)
    assert (
        "Meeting at 2pm?" in (d / "thread.md").read_text()
        and json.loads((d / ".sent").read_text())["message_id"] == first
    )
    (d / "research" / "venue.md").write_text("The venue is on the 3rd floor.")
    # 2. Sent once.
    run_bridge(p)
    assert len(got) == 1
    # 3-5. Reply #1 → NEW Reply #1 → one session → 01-response.md, markers removed, memory kept.
    dovecot.append(_reply(1, "Can we do 3pm?", first, first))
    r = run_bridge(p)
    assert "reply #1 to conversation" in r.stderr and "one session spawned" in r.stderr, r.stderr
    _settle(d, 1)
    thread = (d / "thread.md").read_text()
    assert "## Reply #1 (" in thread and "NEW" not in thread and "## Response to Reply #1\n\n3pm works." in thread
    assert "MEMORY" not in (d / "responses" / "01-response.md").read_text()
    assert "sam@test.com: Sam prefers afternoons" in (p.mail / ".workflow" / "conversations" / "memory.txt").read_text()
    # The response is submitted in the same thread and stays in this conversation (no second one).
    r = run_bridge(p)
    assert len(got) == 2 and len(_conversations(p)) == 1, r.stderr
    response = parse(got[1][2])
    assert response.in_reply_to == "<sam-1@test.com>" and response.references == [first, "<sam-1@test.com>"]
    # 6-7. Replies #2 (In-Reply-To the response only) and #3 while nothing runs: one session, 03-response.md.
    dovecot.append(_reply(2, "Which room?", response.message_id or ""))
    dovecot.append(_reply(3, "Also, bring the deck.", "<sam-2@test.com>", f"{first} <sam-2@test.com>"))
    r = run_bridge(p)
    assert r.stderr.count("one session spawned") == 1 and "reply #2" in r.stderr and "reply #3" in r.stderr, r.stderr
    _settle(d, 3)
    assert len(_conversations(p)) == 1 and not (d / "responses" / "02-response.md").exists()
    # The session's prompt (001_…'s template): the whole thread, research, memory, tools, triage, memory step.
    prompt = sorted((p.dir / "prompts").iterdir())[-1].read_text()
    for part in (
        "Meeting at 2pm?",  # the sent mail
        "## Reply #1 (",
        "## Response to Reply #1",
        "## NEW Reply #2 (",
        "Which room?",
        "## NEW Reply #3 (",
        "venue.md",
        "memory.txt",
        "read_thread",
        "Trivial",
        "Substantive",
        "03-response.md",
        "MEMORY:",
    ):
        assert part in prompt, part
    # 8. A lock someone else wrote (the seed's ISO timestamp) is honoured; 9. stale by mtime after 10 minutes.
    lock = rl.lock_path(d)
    lock.write_text("2026-11-26T10:00:00.000Z")
    dovecot.append(_reply(4, "One more thing.", "<sam-3@test.com>"))
    r = run_bridge(p)
    assert "reply #4" in r.stderr and "spawned" not in r.stderr and lock.read_text().startswith("2026")
    os.utime(lock, (time.time() - 15 * 60, time.time() - 15 * 60))
    r = run_bridge(p)
    assert "one session spawned" in r.stderr, r.stderr
    _settle(d, 4)
    # 10. rebuild-thread gives the sent mail back too.
    (d / "thread.md").unlink()
    r = p.run("bridge", "rebuild-thread", str(d))
    assert r.returncode == 0 and "Meeting at 2pm?" in r.stdout and "## Response to Reply #4" in r.stdout


def test_removing_new_markers_never_touches_a_reply_body(project: Project) -> None:
    d = conv(project)
    body = "Quoting the log:\n## NEW Reply #7 (yesterday from eve)\nend of quote"
    cv.record_reply(d, "sam@test.com", body, "<r1@test.com>")
    cv.record_reply(d, "sam@test.com", "second", "<r2@test.com>")
    cv.remove_new_markers(d / "thread.md")
    text = (d / "thread.md").read_text()
    assert body in text and "## Reply #1 (" in text and "## Reply #2 (" in text
    assert text.count("## NEW") == 1  # only the quoted line inside the body


def test_a_foreign_lock_holds_until_its_mtime_is_ten_minutes_old_and_a_crashed_session_is_reaped_at_once(
    project: Project,
) -> None:
    from workflow.bridges.gmail.bridge import replies

    d = conv(project)
    cv.record_reply(d, "sam@test.com", "hello", "<r1@test.com>")
    lock = rl.lock_path(d)
    for foreign in ("", "2026-11-26T10:00:00.000Z", "{not json"):
        lock.write_text(foreign)
        assert not rl.trigger(project.app, d, lambda _: os.getpid()), repr(foreign)
        assert lock.read_text() == foreign
    lock.unlink()
    # A session that crashes at once: a child of this (long-running) process, left unreaped.
    crashed: list[int] = []

    def crash(_: Path) -> int:
        crashed.append(os.posix_spawnp("sh", ["sh", "-c", "exit 3"], dict(os.environ)))
        return crashed[-1]

    assert rl.trigger(project.app, d, crash)
    end = time.monotonic() + 10
    while Path(f"/proc/{crashed[0]}").exists() and "Z" not in Path(f"/proc/{crashed[0]}/stat").read_text().split()[2]:
        assert time.monotonic() < end
        time.sleep(0.05)
    said: list[str] = []
    scripts = project.dir / "scripted"
    scripts.mkdir(exist_ok=True)
    (scripts / "user.toml").write_text('[[step]]\nsay = "Hello to you."\n')
    replies(project.app, [], said.append)  # the next poll: reaped, counted, retried at once
    assert not Path(f"/proc/{crashed[0]}").exists()  # no zombie left
    assert any("one session spawned" in s for s in said), said
    assert rl.failures(d)["error"] == f"session process {crashed[0]} died"


def test_a_conversation_whose_sessions_keep_failing_backs_off_and_is_reported(project: Project) -> None:
    from workflow.bridges.gmail.bridge import replies

    d = conv(project)  # the role has no script: every session fails
    cv.record_reply(d, "sam@test.com", "hello", "<r1@test.com>")
    said: list[str] = []
    for _ in range(2):  # a failure is retried at the next poll once
        said.clear()
        replies(project.app, [], said.append)
        assert any("one session spawned" in s for s in said), said
        end = time.monotonic() + 30
        while rl.lock_path(d).exists():
            assert time.monotonic() < end
            time.sleep(0.1)
    said.clear()
    replies(project.app, [], said.append)
    assert not any("spawned" in s for s in said)
    (note,) = said
    assert "2 failed session(s) in a row (last: " in note and "no script for user" in note and "next try in" in note
    said.clear()
    replies(project.app, [], said.append)  # reported once, still waiting
    assert said == []
    # When its wait is over it runs again.
    f = rl.failures(d)
    (d / "responses" / ".failures.json").write_text(json.dumps({**f, "at": time.time() - 3600}))
    replies(project.app, [], said.append)
    assert any("one session spawned" in s for s in said), said


AGENT = """\
import json, os, subprocess, sys, time
from pathlib import Path
mode = Path(sys.argv[1]).read_text().strip()
if mode in ("fail", "hang"):  # a shell agent sends mail itself, inside its run: staged, not sent
    r = subprocess.run([sys.executable, "-m", "workflow", "notify", "--from", "user", "question",
                        "specs/*/user-auth.md", "spec-writer", "QUESTION=leaked?"], capture_output=True, text=True)
    print(r.stdout, r.stderr, file=sys.stderr)
if mode == "fail":
    print("half an answer")
    sys.exit(1)
if mode == "hang":
    time.sleep(120)
print(json.dumps({"type": "result", "result": "3pm works.", "session_id": "s1",
                  "usage": {"input_tokens": 700, "output_tokens": 30}}))
"""


def test_a_session_that_fails_or_is_killed_sends_nothing_its_replies_wait_and_agentd_books_it(
    tmp_path: Path,
) -> None:
    """A reply-loop session is one run of its role: run-role's transaction (what it sent is dropped
    when it fails or is killed; its replies wait for the next session), on agentd's books
    (`agentd status` lists it; its tokens count against the role's daily budget)."""
    import signal
    import subprocess
    import sys

    from helpers.project import free_port

    class Nowhere:  # the session never reads IMAP
        port = free_port()

    tail = '[agentd]\ndaily_tokens = 500\n[backends.command]\nargv = ["{py}", "{agent}", "{mode}"]\n'
    p = bridge_project(tmp_path, Nowhere(), "enabled = false\n")  # type: ignore[arg-type]
    agent, mode = p.dir / "agent.py", p.dir / "mode"
    agent.write_text(AGENT)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(tail.format(py=sys.executable, agent=agent, mode=mode))
    d = cv.start(p.app, "<first@workflow.local>", "user", "sam@test.com", "Briefing", "Meeting at 2pm?")
    cv.record_reply(d, "sam@test.com", "Can we do 3pm?", "<r1@test.com>")

    def respond() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "workflow", "bridge", "respond", "--backend", "command", str(d)],
            cwd=p.dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def status() -> dict[str, object]:
        r = p.run("agentd", "status", "--json")
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    def nothing_sent() -> None:
        assert spool(p) == [] and p.new_files("spec-writer") == []
        assert cv.unprocessed(d / "responses") and not (d / "responses" / "01-response.md").exists()

    # 1. It fails after its agent sent mail: nothing goes out, the reply waits, agentd lists the failure.
    mode.write_text("fail")
    out = respond().communicate(timeout=120)[0]
    assert "session failed (1 in a row)" in out and "1 staged message(s) not sent" in out, out
    nothing_sent()
    (failure,) = status()["recent_failures"]  # type: ignore[misc]
    assert failure["kind"] == "reply" and failure["ref"] == d.name and failure["role"] == "user", failure

    # 2. It is killed mid-run (its agent's mail staged): nothing goes out; the next session rolls it back.
    mode.write_text("hang")
    proc = respond()
    outbox = p.mail / ".workflow" / "runs" / "user.run" / "outbox"
    end = time.monotonic() + 60
    while not (outbox.is_dir() and any(outbox.iterdir())):
        assert time.monotonic() < end and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    running = status()["running"]
    assert [(r["kind"], r["ref"]) for r in running] == [("reply", d.name)], running  # type: ignore[index]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    nothing_sent()

    # 3. The next session answers: one reply out, recorded, its tokens booked — over the budget, so
    # the role is paused and the next session waits.
    mode.write_text("ok")
    out = respond().communicate(timeout=120)[0]
    assert "rolling back a run that ended without succeeding" in out and "answered replies up to #1" in out, out
    (reply,) = spool(p)
    assert b"3pm works." in reply and p.new_files("spec-writer") == []
    assert (d / "responses" / "01-response.md").read_text() == "3pm works.\n"
    s = status()
    assert s["tokens_today"] == {"user": 730}, s
    assert [(r["kind"], r["ref"]) for r in s["recent"]] == [("reply", d.name)], s  # type: ignore[index]
    assert (
        "its reply bridge stopped" in json.dumps(s["recent_failures"]) and "daily token budget" in s["paused"]["user"]
    )
    cv.record_reply(d, "sam@test.com", "And the deck?", "<r2@test.com>")
    out = respond().communicate(timeout=120)[0]
    assert "session not started: user is paused: over its daily token budget" in out, out
    assert len(spool(p)) == 1 and cv.unprocessed(d / "responses")


def test_an_answer_whose_run_committed_is_recorded_once_even_after_a_crash_part_way(project: Project) -> None:
    d = conv(project)
    cv.record_reply(d, "sam@test.com", "Can we do 3pm?", "<r1@test.com>")
    answer = {"n": 1, "mid": "<a1@workflow.local>", "answer": "3pm works.", "notes": ["Sam likes afternoons"]}
    (d / "responses" / ".answer.json").write_text(json.dumps(answer))
    memory = project.mail / ".workflow" / "conversations" / "memory.txt"
    for _ in range(2):  # the second time: a crash after recording left it (nothing is recorded twice)
        rl.finish_answer(project.app, d)
        (d / "responses" / ".answer.json").write_text(json.dumps(answer))
    assert (d / "responses" / "01-response.md").read_text() == "3pm works.\n" and not cv.unprocessed(d / "responses")
    thread = (d / "thread.md").read_text()
    assert thread.count("## Response to Reply #1") == 1 and "NEW" not in thread
    assert memory.read_text().count("Sam likes afternoons") == 1
    (d / "responses" / ".answer.json").write_text("{not json")  # half-written: its run committed nothing
    assert rl.finish_answer(project.app, d) is None and not (d / "responses" / ".answer.json").exists()
