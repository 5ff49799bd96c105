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
from workflow.bridges.gmail import replyloop as rl
from workflow.mail.message import parse


def conv(p: Project) -> Path:
    return rl.start(
        p.app, "<first@workflow.local>", "user", "sam@test.com", "Briefing", "The briefing body.", "2026-11-26 05:00"
    )


def test_state_detection(tmp_path: Path) -> None:
    d = tmp_path / "r"
    assert rl.max_reply(d) == 0 and rl.max_response(d) == 0 and not rl.unprocessed(d)
    d.mkdir()
    (d / "01-reply.md").write_text("x")
    assert rl.max_reply(d) == 1 and rl.unprocessed(d)
    (d / "03-reply.md").write_text("x")
    assert rl.max_reply(d) == 3  # gaps
    (d / "03-response.md").write_text("x")
    assert rl.max_response(d) == 3 and not rl.unprocessed(d)
    (d / "04-reply.md").write_text("x")
    assert rl.unprocessed(d)


def test_thread_order_special_characters_and_new_markers(project: Project) -> None:
    d = conv(project)
    weird = 'He said "ok" `rm -rf` \n## Not a header\n```\ncode\n```\n<b>&amp;</b> émoji ✓'
    assert rl.record_reply(d, "sam@test.com", weird, "<r1@test.com>") == 1
    (d / "responses" / "01-response.md").write_text("answer 1")
    rl.append(d / "thread.md", "Response to Reply #1", "answer 1")
    rl.remove_new_markers(d / "thread.md")
    assert rl.record_reply(d, "sam@test.com", "second", "<r2@test.com>") == 2
    assert rl.record_reply(d, "sam@test.com", "third", "<r3@test.com>") == 3
    assert rl.record_reply(d, "sam@test.com", "third", "<r3@test.com>") == 3  # the same reply again: not twice
    text = (d / "thread.md").read_text()
    order = [
        text.index(s)
        for s in ("## Sent", "## Reply #1", "## Response to Reply #1", "## NEW Reply #2", "## NEW Reply #3")
    ]
    assert order == sorted(order)
    assert weird.rstrip() in text
    rl.remove_new_markers(d / "thread.md")
    after = (d / "thread.md").read_text()
    assert "NEW" not in after and "## Reply #2" in after and "## Reply #3" in after and weird.rstrip() in after
    # thread.md can be rebuilt from the numbered files
    (d / "thread.md").unlink()
    rebuilt = rl.rebuild_thread(d)
    assert "## Reply #1" in rebuilt and "## Response to Reply #1" in rebuilt and "## NEW Reply #3" in rebuilt


def test_concurrent_appends_lose_nothing(project: Project) -> None:
    d = conv(project)
    threads = [
        threading.Thread(target=rl.append, args=(d / "thread.md", f"Section {i}", f"body {i}")) for i in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = (d / "thread.md").read_text()
    assert all(f"## Section {i}\n\nbody {i}\n" in text for i in range(20))


def test_prompt_inlines_the_thread_and_refuses_without_one(project: Project) -> None:
    d = conv(project)
    rl.record_reply(d, "sam@test.com", "Can we move it to 3pm?", "<r1@test.com>")
    text = rl.prompt(d)
    assert "## NEW Reply #1" in text and "Can we move it to 3pm?" in text and "01-response.md" in text
    (d / "thread.md").unlink()
    from workflow.core.errors import WorkflowError

    with pytest.raises(WorkflowError, match="thread.md is missing"):
        rl.prompt(d)


def test_lock_no_double_spawn_batching_and_stale_lock(project: Project) -> None:
    d = conv(project)
    spawns: list[int] = []

    def spawn(_: Path) -> int:
        spawns.append(1)
        return os.getpid()  # a live process stands in for the session

    assert not rl.trigger(project.app, d, spawn)  # nothing unprocessed: no lock, no spawn
    assert not rl.lock_path(d).exists()
    for i in range(1, 4):
        rl.record_reply(d, "sam@test.com", f"reply {i}", f"<r{i}@test.com>")
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
    assert not rl.unprocessed(d / "responses")
    rl.record_reply(d, "sam@test.com", "reply 4", "<r4@test.com>")
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 2
    # Stale: a lock older than 10 minutes (its process may even be alive) is cleared by the next trigger.
    (d / "responses" / "04-response.md").write_text("x")
    rl.record_reply(d, "sam@test.com", "reply 5", "<r5@test.com>")
    lock = rl.lock_path(d)
    lock.write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": time.time() - 15 * 60}))
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 3
    # And a lock whose process is gone is stale at once.
    (d / "responses" / "05-response.md").write_text("x")
    rl.record_reply(d, "sam@test.com", "reply 6", "<r6@test.com>")
    lock.write_text(json.dumps({"pid": 999_999, "host": os.uname().nodename, "started": time.time()}))
    assert rl.trigger(project.app, d, spawn) and len(spawns) == 4


@needs_dovecot
def test_the_loop_end_to_end_through_dovecot(tmp_path: Path, dovecot: object) -> None:
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    p = bridge_project(tmp_path, dovecot, "enabled = false\n")
    (p.dir / "scripted").mkdir()
    (p.dir / "scripted" / "user.toml").write_text('[[step]]\nsay = "3pm works. See you then."\n')
    d = rl.start(p.app, "<brief-1@workflow.local>", "user", "sam@test.com", "Briefing", "Meeting at 2pm.")
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
