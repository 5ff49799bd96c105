"""A person's plain mail is typed at delivery (``delivery.plain``): sent by the real msmtp as a
person's login, with no header a phone or web client could not write, each message is stored
with the type its rules give and the ``X-Workflow-Typing`` line that says why."""

from __future__ import annotations

import shutil
import smtplib
from pathlib import Path

import pytest

from helpers.people import add_people, msmtp
from helpers.project import Project, make_project
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.mail.message import Parsed, parse

pytestmark = pytest.mark.skipif(shutil.which("msmtp") is None, reason="needs msmtp (scripts/system-packages)")


def stored(p: Project, box: str, needle: str) -> Parsed:
    [found] = [parse(f.read_bytes()) for f in p.new_files(box) if needle.encode() in f.read_bytes()]
    return found


def test_a_persons_plain_mail_is_typed_by_the_documented_rules(tmp_path: Path) -> None:
    p = add_people(make_project(tmp_path / "p"))
    with BackgroundServer(p.app.config, p.app.deliverer, sockets=()) as port:
        # new mail: a question to the role it is addressed to
        r = msmtp(
            p, "alice", port, "To: spec-writer@workflow.local\nSubject: CSV\n\ncan we get CSV export done this week?\n"
        )
        assert r.returncode == 0, r.stderr
        m = stored(p, "spec-writer", "CSV export")
        assert m.event == "question" and m.get("X-Workflow-Typing") == "question: new mail to spec-writer"

        request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
        reply = (
            f"To: spec-writer@workflow.local\nSubject: Re: user-auth\nIn-Reply-To: {request}\nReferences: {request}\n\n"
        )

        # nearly a decision: stored untyped (nothing wakes, nothing moves), marked unsure
        assert msmtp(p, "bob", port, reply + "Apprvoed, nice work\n").returncode == 0
        m = stored(p, "spec-writer", "nice work")
        assert m.event is None
        assert (m.get("X-Workflow-Typing") or "").startswith(
            "unsure approval: the first word 'Apprvoed' is nearly 'Approved'"
        )

        # a decision: untyped, agentd applies it
        assert msmtp(p, "bob", port, reply + "Approve. Complete.\n").returncode == 0
        m = stored(p, "spec-writer", "Complete.")
        assert m.event is None and (m.get("X-Workflow-Typing") or "").startswith("decision approval:")

        # any other reply in the review's thread: a question to the requester, about the artifact
        assert msmtp(p, "bob", port, reply + "What about timeouts?\n").returncode == 0
        m = stored(p, "spec-writer", "timeouts")
        assert m.event == "question" and m.artifacts == ["specs/proposed/user-auth.md"]
        assert "to its requester spec-writer" in (m.get("X-Workflow-Typing") or "")

        # a review-request alice never received is no thread of hers: refused, nothing stored
        text = f"To: spec-writer@workflow.local\nSubject: Re: x\nIn-Reply-To: {request}\n\nApprove it all\n"
        r = msmtp(p, "alice", port, text)
        assert r.returncode != 0 and "reply-visible" in r.stderr, r.stderr
        assert not [f for f in p.new_files("spec-writer") if b"Approve it all" in f.read_bytes()]

        # a reply to a question the person was asked: an answer
        asked = p.send("spec-reviewer", "clarification-request", "specs/proposed/user-auth.md", "user", QUESTION="why?")
        text = f"To: spec-reviewer@workflow.local\nSubject: Re: why\nIn-Reply-To: {asked}\n\nBecause users asked.\n"
        assert msmtp(p, "alice", port, text).returncode == 0
        m = stored(p, "spec-reviewer", "users asked")
        assert m.event == "answer" and (m.get("X-Workflow-Typing") or "").startswith(
            "answer: a reply to the clarification-request"
        )

        # typed by the person: kept as sent
        text = "To: spec-writer@workflow.local\nSubject: typed\nX-Event-Type: question\n\nTyped by mutt.\n"
        assert msmtp(p, "alice", port, text).returncode == 0
        m = stored(p, "spec-writer", "Typed by mutt")
        assert m.event == "question" and m.get("X-Workflow-Typing") == "sent"

        # a client retrying after a lost 250 sends the same bytes: typed alike, recognised, stored once
        retry = (
            "From: user@workflow.local\r\nTo: spec-writer@workflow.local\r\nSubject: again\r\n"
            "Message-ID: <retry.1@phone.example>\r\n\r\nsent twice\r\n"
        )
        for _ in range(2):
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
                s.login("alice", "alice-pw")
                s.sendmail("user@workflow.local", ["spec-writer@workflow.local"], retry)
        assert len([f for f in p.new_files("spec-writer") if b"sent twice" in f.read_bytes()]) == 1

        # the header is the server's: a person who writes it is refused, in words
        text = "To: spec-writer@workflow.local\nSubject: forged\nX-Workflow-Typing: sent\n\nforged\n"
        r = msmtp(p, "alice", port, text)
        assert r.returncode != 0 and "X-Workflow-Typing" in r.stderr, r.stderr
        assert not [f for f in p.new_files("spec-writer") if b"forged" in f.read_bytes()]
