"""Seed 001's reply loop test plan: state detection, thread.md integrity, NEW markers, one question per
batch of replies, threading headers — and the loop end to end through a real Dovecot, its
conversations' roles run by a real agentd."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from helpers.agentd import Daemon
from helpers.gmail import PASSWORD, bridge_project, needs_dovecot, run_bridge, spool
from helpers.project import Project
from workflow.agents import asked
from workflow.bridges.gmail import conversation as cv
from workflow.bridges.gmail import replyloop as rl
from workflow.delivery.transport import make_transport
from workflow.mail.body import body_text
from workflow.mail.message import parse
from workflow.policy.roster import bridge_mailbox

AGENTD = '[agentd]\nbackend = "scripted"\nrescan = 1\nmax_attempts = 1\n'


@pytest.fixture
def gp(tmp_path: Path) -> Project:
    """A project with the Gmail bridge configured (its IMAP server never read), its outbound on."""
    from helpers.project import free_port

    class Nowhere:
        port = free_port()

    return bridge_project(tmp_path, Nowhere(), "enabled = false\n", tail=AGENTD)


def conv(p: Project, role: str = "spec-writer") -> Path:
    return cv.start(
        p.app, "<first@workflow.local>", role, "sam@test.com", "Briefing", "The briefing body.", "2026-11-26 05:00"
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


def test_the_prompt_material_is_the_thread_up_to_the_asked_reply_research_and_memory(project: Project) -> None:
    d = conv(project)
    cv.record_reply(d, "sam@test.com", "Can we move it to 3pm?", "<r1@test.com>")
    cv.record_reply(d, "sam@test.com", "LATER: and the deck?", "<r2@test.com>")
    (d / "research" / "venue.md").write_text("The venue is on the 3rd floor.")
    cv.memory_file(project.app).write_text("sam@test.com: Sam prefers afternoons\n")
    text = asked.material(project.app, d.name, 1)
    assert "## NEW Reply #1" in text and "Can we move it to 3pm?" in text and "LATER" not in text
    assert "research/venue.md" in text and "3rd floor" in text and "Sam prefers afternoons" in text
    assert "Trivial" in text and "MEMORY:" in text
    assert "LATER: and the deck?" in asked.material(project.app, d.name)  # 0: the whole thread
    (d / "thread.md").unlink()
    from workflow.core.errors import WorkflowError

    with pytest.raises(WorkflowError, match="thread.md is missing"):
        asked.material(project.app, d.name)


def questions(p: Project, role: str = "spec-writer") -> list[bytes]:
    return [f.read_bytes() for f in p.new_files(role) if b"X-Workflow-Conversation:" in f.read_bytes()]


def test_one_question_per_batch_of_replies_and_none_while_it_is_outstanding(gp: Project) -> None:
    d = conv(gp)
    said: list[str] = []
    rl.loop(gp.app, said.append)  # nothing unprocessed: nothing asked
    assert questions(gp) == [] and said == []
    for i in range(1, 4):
        cv.record_reply(d, "sam@test.com", f"reply {i}", f"<r{i}@test.com>")
    rl.loop(gp.app, said.append)
    (q,) = questions(gp)  # one question for three replies, from the conversation's address
    m = parse(q)
    assert m.sender == f"{rl.address(d)}@workflow.local" and m.event == "question", q
    assert m.get("X-Workflow-Conversation") == d.name and m.get("X-Workflow-Replies") == "3"
    assert "replied (#1–#3)" in body_text(q) and any("asked spec-writer about replies #1–#3" in s for s in said)
    cv.record_reply(d, "sam@test.com", "reply 4", "<r4@test.com>")
    rl.loop(gp.app, said.append)
    assert len(questions(gp)) == 1  # one outstanding question per conversation
    # A crash after the question was recorded, before it was sent: the same bytes go out (stored once).
    q0 = rl.asked(d)
    (d / "responses" / ".asked.json").write_text(json.dumps({**q0, "sent": False}))
    rl.loop(gp.app, said.append)
    assert len(questions(gp)) == 1 and rl.asked(d)["sent"] is True


def test_a_conversation_of_a_persons_role_is_theirs_to_answer(gp: Project) -> None:
    d = conv(gp, "user")
    cv.record_reply(d, "sam@test.com", "hello", "<r1@test.com>")
    said: list[str] = []
    for _ in range(2):
        rl.loop(gp.app, said.append)
    assert said == [
        f"conversation {d.name}: not asked: user is a human role: its correspondent's replies are in "
        "its inbox, for a person to answer"
    ], said
    assert questions(gp, "user") == []


def _reply(i: int, text: str, in_reply_to: str, refs: str = "") -> bytes:
    head = f"In-Reply-To: {in_reply_to}\r\n" + (f"References: {refs}\r\n" if refs else "")
    return (
        f"From: sam@test.com\r\nTo: me@example.com\r\nSubject: Re: Briefing\r\nMessage-ID: <sam-{i}@test.com>\r\n"
        f"Date: Thu, 26 Nov 2026 1{i}:00:00 +0000\r\n{head}\r\n{text}\r\n"
    ).encode()


def _answers(p: Project) -> int:
    """How many answers the roles sent back to the Gmail bridge's mailbox."""
    box = p.mail / bridge_mailbox("gmail")
    return sum(1 for sub in ("new", "cur") if (box / sub).is_dir() for _ in (box / sub).iterdir())


def _conversations(p: Project) -> list[Path]:
    base = p.mail / ".workflow" / "conversations"
    return sorted(d for d in base.iterdir() if (d / ".sent").exists())


@needs_dovecot
def test_a_conversation_of_another_role_than_the_import_role_is_answered_end_to_end(
    tmp_path: Path, dovecot: object
) -> None:
    """spec-writer mailed sam through the bridge, whose imports go to `user`: sam's replies reach
    spec-writer too; the bridge asks spec-writer once for both, agentd runs it, and its answer
    goes back to sam in the thread (In-Reply-To a reply it received)."""
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    p = bridge_project(tmp_path, dovecot, "enabled = false\n", tail=AGENTD)
    (p.dir / "scripted").mkdir()
    (p.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsay = "3pm works. See you then."\n')
    d = cv.start(p.app, "<brief-1@workflow.local>", "spec-writer", "sam@test.com", "Briefing", "Meeting at 2pm.")
    dovecot.append(_reply(1, "Can we do 3pm?", "<brief-1@workflow.local>", "<brief-1@workflow.local>"))
    dovecot.append(_reply(2, "Also, bring the deck.", "<sam-1@test.com>", "<brief-1@workflow.local> <sam-1@test.com>"))
    r = run_bridge(p)
    assert r.returncode == 0 and "asked spec-writer about replies #1–#2" in r.stderr, r.stderr
    agentd = Daemon(p)
    try:
        agentd.wait_for(lambda: _answers(p) == 1, "spec-writer's answer")
    finally:
        agentd.stop()
    r = run_bridge(p)
    assert "answered replies up to #2" in r.stderr, r.stderr
    thread = (d / "thread.md").read_text()
    assert "## Reply #1" in thread and "## Reply #2" in thread and "NEW" not in thread
    assert "## Response to Reply #2\n\n3pm works. See you then." in thread
    (out,) = spool(p)
    m = parse(out)
    assert m.sender == "spec-writer@workflow.local" and m.in_reply_to == "<sam-2@test.com>"
    assert m.references == ["<brief-1@workflow.local>", "<sam-1@test.com>", "<sam-2@test.com>"]
    assert m.subject == "Re: Briefing" and "sam@test.com" in m.recipients
    for role in ("user", "spec-writer"):  # the import role keeps its copy; the conversation's role has one
        assert any(b"<sam-1@test.com>" in f.read_bytes() for f in p.new_files(role)), role
    r = run_bridge(p)  # nothing new: nothing asked, nothing sent
    assert "asked" not in r.stderr and "answered" not in r.stderr and len(spool(p)) == 1
    assert PASSWORD


@needs_dovecot
def test_the_seeds_test_plan_one_conversation_per_thread_end_to_end(
    tmp_path: Path, dovecot: object, provider: tuple[int, list[tuple[str, list[str], bytes]]]
) -> None:
    """001_…'s end-to-end plan through a real Dovecot, a provider's SMTP server and agentd: the
    sent mail opens one conversation; responses and replies to responses stay in it; replies
    that come while a question is outstanding are asked next (docs/bridges.md)."""
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    port, got = provider
    p = bridge_project(
        tmp_path,
        dovecot,
        "enabled = false\n",
        gmail=f'smtp_host = "127.0.0.1"\nsmtp_port = {port}\nsmtp_tls = "none"\n',
        tail=AGENTD + '[backends.scripted]\nrecord_dir = "prompts"\n',
    )
    (p.dir / "scripted").mkdir()
    script = p.dir / "scripted" / "spec-writer.toml"
    script.write_text('[[step]]\nsay = "3pm works. See you then."\n[[step]]\nsay = "MEMORY: Sam prefers afternoons"\n')
    # 1. The role's mail goes out and opens a conversation: sent.md, thread.md, .sent.
    r = p.run(
        "--from",
        "spec-writer",
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
    agentd = Daemon(p)
    try:
        # 3-5. Reply #1 → NEW Reply #1 → one question → 01-response.md, markers removed, memory kept.
        dovecot.append(_reply(1, "Can we do 3pm?", first, first))
        r = run_bridge(p)
        assert "reply #1 to conversation" in r.stderr and "asked spec-writer about replies #1" in r.stderr, r.stderr
        agentd.wait_for(lambda: _answers(p) == 1, "the first answer")
        r = run_bridge(p)
        assert "answered replies up to #1" in r.stderr, r.stderr
        thread = (d / "thread.md").read_text()
        assert "## Reply #1 (" in thread and "NEW" not in thread and "## Response to Reply #1\n\n3pm works." in thread
        assert "MEMORY" not in (d / "responses" / "01-response.md").read_text()
        memory = (p.mail / ".workflow" / "conversations" / "memory.txt").read_text()
        assert "sam@test.com: Sam prefers afternoons" in memory
        # The response was submitted in the same thread and stays in this conversation (no second one).
        assert len(got) == 2 and len(_conversations(p)) == 1, r.stderr
        response = parse(got[1][2])
        assert response.in_reply_to == "<sam-1@test.com>" and response.references == [first, "<sam-1@test.com>"]
        # 6-7. Replies #2 (In-Reply-To the response only) and #3 while nothing runs: one question, 03-response.md;
        # reply #4 comes while it is outstanding: asked next, once #2–#3 are answered.
        agentd.stop()
        dovecot.append(_reply(2, "Which room?", response.message_id or ""))
        dovecot.append(_reply(3, "Also, bring the deck.", "<sam-2@test.com>", f"{first} <sam-2@test.com>"))
        r = run_bridge(p)
        assert r.stderr.count("asked spec-writer") == 1 and "replies #2–#3" in r.stderr, r.stderr
        dovecot.append(_reply(4, "One more thing.", "<sam-3@test.com>"))
        r = run_bridge(p)
        assert "reply #4" in r.stderr and "asked" not in r.stderr, r.stderr
        agentd = Daemon(p)
        agentd.wait_for(lambda: _answers(p) == 2, "the answer to #2–#3")
        r = run_bridge(p)
        assert "answered replies up to #3" in r.stderr and "asked spec-writer about replies #4" in r.stderr, r.stderr
        assert len(_conversations(p)) == 1 and not (d / "responses" / "02-response.md").exists()
        # The run's prompt (001_…'s template): the thread up to #3, research, memory, triage, memory step.
        prompt = next(
            f.read_text() for f in sorted((p.dir / "prompts").iterdir()) if "## NEW Reply #3 (" in f.read_text()
        )
        for part in (
            "Meeting at 2pm?",  # the sent mail
            "## Reply #1 (",
            "## Response to Reply #1",
            "## NEW Reply #2 (",
            "Which room?",
            "## NEW Reply #3 (",
            "venue.md",
            "3rd floor",
            "memory.txt",
            "Sam prefers afternoons",
            "Trivial",
            "Substantive",
            "MEMORY:",
        ):
            assert part in prompt, part
        assert "One more thing." not in prompt  # #4 is the next question's
        agentd.wait_for(lambda: _answers(p) == 3, "the answer to #4")
        r = run_bridge(p)
        assert "answered replies up to #4" in r.stderr, r.stderr
        st = json.loads(p.run("agentd", "status", "--json").stdout)
        address = f"{rl.address(d)}@workflow.local"
        assert [(x["role"], x["kind"], x["ref"]) for x in st["recent"]] == [("spec-writer", "bridge", address)] * 3
    finally:
        agentd.stop()
    # 10. rebuild-thread gives the sent mail back too.
    (d / "thread.md").unlink()
    r = p.run("bridge", "rebuild-thread", str(d))
    assert r.returncode == 0 and "Meeting at 2pm?" in r.stdout and "## Response to Reply #4" in r.stdout


@needs_dovecot
def test_a_role_that_cannot_answer_sends_nothing_and_is_asked_again_at_the_next_reply(
    tmp_path: Path, dovecot: object
) -> None:
    """The conversation's run fails (no script for spec-writer): agentd gives up and tells the
    bridge, nothing goes to sam, and the conversation waits; sam's next reply asks again, and
    that run answers both."""
    from helpers.dovecot import Dovecot

    assert isinstance(dovecot, Dovecot)
    p = bridge_project(tmp_path, dovecot, "enabled = false\n", tail=AGENTD)
    d = cv.start(p.app, "<brief-1@workflow.local>", "spec-writer", "sam@test.com", "Briefing", "Meeting at 2pm.")
    dovecot.append(_reply(1, "Can we do 3pm?", "<brief-1@workflow.local>"))
    assert "asked spec-writer" in run_bridge(p).stderr
    agentd = Daemon(p)
    try:
        agentd.wait_for(lambda: _answers(p) == 1, "agentd's word that spec-writer gave up")
        r = run_bridge(p)
        assert "spec-writer@workflow.local could not answer" in r.stderr and "waits for a new reply" in r.stderr
        assert "no script for spec-writer" in r.stderr, r.stderr
        assert spool(p) == [] and cv.unprocessed(d / "responses")
        assert "asked" not in run_bridge(p).stderr  # it waits
        (p.dir / "scripted").mkdir()
        (p.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsay = "3pm it is, deck included."\n')
        dovecot.append(_reply(2, "Hello?", "<sam-1@test.com>"))
        assert "asked spec-writer about replies #1–#2" in run_bridge(p).stderr
        agentd.wait_for(lambda: _answers(p) == 2, "the answer")
    finally:
        agentd.stop()
    assert "answered replies up to #2" in run_bridge(p).stderr
    (out,) = spool(p)
    assert b"3pm it is, deck included." in out


def test_removing_new_markers_never_touches_a_reply_body(project: Project) -> None:
    d = conv(project)
    body = "Quoting the log:\n## NEW Reply #7 (yesterday from eve)\nend of quote"
    cv.record_reply(d, "sam@test.com", body, "<r1@test.com>")
    cv.record_reply(d, "sam@test.com", "second", "<r2@test.com>")
    cv.remove_new_markers(d / "thread.md")
    text = (d / "thread.md").read_text()
    assert body in text and "## Reply #1 (" in text and "## Reply #2 (" in text
    assert text.count("## NEW") == 1  # only the quoted line inside the body


def test_an_answer_is_sent_and_recorded_once_even_after_a_crash_part_way(gp: Project) -> None:
    d = conv(gp)
    cv.record_reply(d, "sam@test.com", "Can we do 3pm?", "<r1@test.com>")
    raw = rl._reply_bytes(
        gp.app, json.loads((d / ".sent").read_text()), cv.reply_chain(d), "3pm works.", "<a1@workflow.local>"
    )
    import base64

    answer = {
        "n": 1,
        "mid": "<a1@workflow.local>",
        "text": "3pm works.",
        "notes": ["Sam likes afternoons"],
        "raw": base64.b64encode(raw).decode(),
    }
    transport = make_transport(gp.app.config, gp.app.deliverer)
    memory = gp.mail / ".workflow" / "conversations" / "memory.txt"
    for _ in range(2):  # the second time: a crash after recording left it (nothing is sent or recorded twice)
        (d / "responses" / ".answer.json").write_text(json.dumps(answer))
        rl.finish_answer(gp.app, d, transport)
    assert (d / "responses" / "01-response.md").read_text() == "3pm works.\n" and not cv.unprocessed(d / "responses")
    thread = (d / "thread.md").read_text()
    assert thread.count("## Response to Reply #1") == 1 and "NEW" not in thread
    assert memory.read_text().count("Sam likes afternoons") == 1
    assert len(spool(gp)) == 1
    (d / "responses" / ".answer.json").write_text("{not json")  # half-written: nothing it names was sent
    assert rl.finish_answer(gp.app, d, transport) is None and not (d / "responses" / ".answer.json").exists()


def test_agentd_killed_mid_run_the_restarted_one_sees_it_through_and_sam_is_answered_once(gp: Project) -> None:
    """SIGKILL of agentd while the conversation's run is under way: the restarted agentd sees the
    question through, and the bridge sends one answer, whatever the killed run left behind."""
    import signal

    (gp.dir / "scripted").mkdir()
    (gp.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsleep = 2.5\n[[step]]\nsay = "3pm works."\n')
    d = conv(gp)
    cv.record_reply(d, "sam@test.com", "Can we do 3pm?", "<r1@test.com>")
    said: list[str] = []
    rl.loop(gp.app, said.append)
    assert len(questions(gp)) == 1, said
    agentd = Daemon(gp)
    try:
        agentd.wait_for(lambda: any("task" in e for e in agentd.events("started")), "the run to start")
        agentd.stop(signal.SIGKILL)
        assert _answers(gp) == 0  # killed before the run could answer
        agentd = Daemon(gp)
        agentd.wait_for(lambda: _answers(gp) >= 1 and agentd.idle(), "the answer after agentd's crash", timeout=60)
    finally:
        agentd.stop()
    assert [e["event"] for e in agentd.events() if e["event"] in ("adopted", "completed")] == ["adopted", "completed"]
    for _ in range(2):  # a second pass finds nothing more to send
        rl.loop(gp.app, said.append)
    (out,) = spool(gp)
    assert b"3pm works." in out and parse(out).in_reply_to == "<r1@test.com>"
    assert (d / "responses" / "01-response.md").read_text() == "3pm works.\n"
    assert sum("answered replies up to #1" in s for s in said) == 1, said


def test_two_answers_to_one_question_send_one_reply(gp: Project) -> None:
    """A role that answers twice (a retried run that had sent already): the first answer is sent, the
    second answers a question no longer open and is only read."""
    from workflow.mail.message import Draft, build

    d = conv(gp)
    cv.record_reply(d, "sam@test.com", "Can we do 3pm?", "<r1@test.com>")
    said: list[str] = []
    rl.loop(gp.app, said.append)
    q = rl.asked(d)["mid"]
    transport = make_transport(gp.app.config, gp.app.deliverer)
    for i, text in enumerate(["3pm works.", "3pm works, again."]):
        raw = build(
            Draft(
                sender=gp.app.roster.address("spec-writer"),
                to=[f"{rl.address(d)}@workflow.local"],
                subject="Re: Briefing",
                body=text + "\n",
                message_id=f"<answer-{i}@workflow.local>",
                in_reply_to=q,
                references=[q],
            )
        )
        transport.send(raw, gp.app.roster.address("spec-writer"), [f"{rl.address(d)}@workflow.local"])
    rl.loop(gp.app, said.append)
    (out,) = spool(gp)
    assert b"3pm works." in out and b"again" not in out
    assert sum("answers no open question" in s for s in said) == 1, said
