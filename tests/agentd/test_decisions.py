"""Decisions by mail: a person's reply to a review-request is applied as their move, by the running
project (`workflow up` with no agent backend chosen), and a decision that cannot be applied comes
back to the person saying why."""

from __future__ import annotations

import os
import signal
import smtplib
import socket
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path

import pytest

from helpers.agentd import default_sigint, wait_until
from helpers.git import GIT_ENV, git_project, sh
from helpers.project import TESTER, TESTER_PASSWORD, Project
from workflow.app import App
from workflow.artifacts.decisions import verdict
from workflow.core.config import load_config
from workflow.core.errors import GuardrailError
from workflow.delivery.transport import make_transport
from workflow.mail.message import parse

REVIEWER = '+++\nmode = "human"\ndescription = "bob reviews specs from his mail client"\n+++\n\n# spec-reviewer\n'


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Approve.\n\nLooks complete.\n\n> the request\n", ("approval", "Looks complete.")),
        ("LGTM\n", ("approval", "")),
        (
            "\n> quoted first\nrevise: add the error cases\nand the limits\n-- \nbob\n",
            ("rejection", "add the error cases\nand the limits"),
        ),
        ("Rejected — too vague\nOn Mon, spec-writer wrote:\n> x\n", ("rejection", "too vague")),
        ("I think we should approve\n", None),
        ("Approve. nul\x00here\n", ("approval", "nulhere")),
        ("> Approve\n", None),
        ("", None),
    ],
)
def test_the_first_own_line_of_a_reply_says_the_decision(text: str, want: tuple[str, str] | None) -> None:
    assert verdict(text) == want


def _reply(p: Project, request: str, first_line: str, subject: str) -> str:
    """What a mail client sends when bob answers: the headers a client writes, nothing of ours."""
    m = EmailMessage()
    m["From"] = "Bob Reviewer <spec-reviewer@workflow.local>"
    m["To"] = "spec-writer@workflow.local"
    m["Subject"] = f"Re: {subject}"
    m["In-Reply-To"] = request
    m["References"] = request
    mid = f"<{time.time_ns()}.bob@laptop.example>"
    m["Message-ID"] = mid
    m.set_content(f"{first_line}\n\nOn Sat, spec-writer wrote:\n> please review\n")
    with smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=10) as s:
        s.login(TESTER, TESTER_PASSWORD)
        s.send_message(m)
    return mid


def _copies(p: Project, box: str, event: str) -> list[tuple[str | None, str | None, str]]:
    out = []
    for f in p.new_files(box):
        m = parse(f.read_bytes())
        if m.event == event:
            out.append((m.sender, m.in_reply_to, f.read_text()))
    return out


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_person_decides_by_mail_and_the_project_applies_it(tmp_path: Path) -> None:
    p = git_project(tmp_path / "ad")
    toml = p.dir / "workflow.toml"
    toml.write_text(toml.read_text().replace('backend = "scripted"\n', ""))  # no agent backend chosen yet
    (p.dir / "roles" / "spec-reviewer.md").write_text(REVIEWER)  # bob takes the reviewer's role himself
    for name in ("billing", "search", "other", "typed"):
        (p.dir / "specs" / "proposed" / f"{name}.md").write_text(f"# {name}\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "bob reviews; two more specs")
    p = Project(p.dir, App(load_config(p.dir / "workflow.toml", env={})))
    out = tmp_path / "up.out"
    with open(out, "wb") as f:
        up = subprocess.Popen(
            [sys.executable, "-m", "workflow", "up"],
            cwd=p.dir,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV},
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=default_sigint,
        )
    try:
        wait_until(lambda: _listening(p.app.config.smtp.port) and b"started" in out.read_bytes(), "workflow up")
        said = out.read_text()
        assert "cannot run until a backend is chosen" in said and "coordinator" in said, said

        requests = {
            name: p.send("spec-writer", "review-request", f"specs/proposed/{name}.md", "spec-reviewer")
            for name in ("user-auth", "billing", "search", "typed")
        }
        commits = int(sh(p, "git", "rev-list", "--count", "HEAD").stdout)

        # an approval: the artifact moves to todo/ in one commit that is bob's, and spec-writer is told
        approve = _reply(p, requests["user-auth"], "Approve. Looks complete.", "[REVIEW REQUEST] user-auth")
        wait_until(lambda: "decided" in (p.app.config.state.agentd_log.read_text()), "the approval to be applied")
        assert (p.dir / "specs/todo/user-auth.md").exists()
        assert int(sh(p, "git", "rev-list", "--count", "HEAD").stdout) == commits + 1
        head = sh(p, "git", "log", "-1", "--format=%an%n%B").stdout
        assert head.startswith("spec-reviewer\n") and "proposed → todo" in head and "Looks complete." in head, head
        wait_until(lambda: _copies(p, "spec-writer", "approval"), "spec-writer to be told")
        [(sender, parent, text)] = _copies(p, "spec-writer", "approval")
        assert sender == "spec-reviewer@workflow.local" and parent == approve and "todo/" in text

        # a revision: the artifact stays in proposed/, spec-writer gets a rejection with the reason
        _reply(p, requests["search"], "Revise: add the error cases.", "[REVIEW REQUEST] search")
        wait_until(lambda: _copies(p, "spec-writer", "rejection"), "the rejection to reach spec-writer")
        [(_, _, text)] = _copies(p, "spec-writer", "rejection")
        assert "add the error cases" in text and (p.dir / "specs/proposed/search.md").exists()

        # moved meanwhile: nothing changes, and bob hears why, by mail
        r = p.run("move", "billing", "todo", "--as", "user", env=GIT_ENV)
        assert r.returncode == 0, r.stderr
        _reply(p, requests["billing"], "Reject - too vague", "[REVIEW REQUEST] billing")
        wait_until(lambda: _copies(p, "spec-reviewer", "status-update"), "bob to hear why")
        [(_, _, text)] = _copies(p, "spec-reviewer", "status-update")
        assert "not applied" in text and "billing.md is in todo/ now" in text, text
        assert (p.dir / "specs/todo/billing.md").exists()

        # an artifact nobody asked bob to review: a typed approval of it is not his to make by mail
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = "spec-reviewer@workflow.local", "spec-writer@workflow.local", "other"
        m["X-Event-Type"], m["X-Artifacts"] = "approval", "specs/proposed/other.md"
        m.set_content("Approve.\n")
        with smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=10) as s:
            s.login(TESTER, TESTER_PASSWORD)
            s.send_message(m)
        wait_until(lambda: len(_copies(p, "spec-reviewer", "status-update")) == 2, "bob to hear why not")
        assert any("was never asked to review" in t for _, _, t in _copies(p, "spec-reviewer", "status-update"))
        assert (p.dir / "specs/proposed/other.md").exists()

        # a typed approval (a client that adds the header) is the notification itself: applied, and
        # doctor reads it as claiming todo/, where the artifact now is
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = "spec-reviewer@workflow.local", "spec-writer@workflow.local", "typed"
        m["X-Event-Type"], m["X-Artifacts"], m["In-Reply-To"] = "approval", "specs/proposed/typed.md", requests["typed"]
        m.set_content("Fine by me.\n")
        with smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=10) as s:
            s.login(TESTER, TESTER_PASSWORD)
            s.send_message(m)
        wait_until(lambda: (p.dir / "specs/todo/typed.md").exists(), "the typed approval to be applied")
        # the file is in todo/ a moment before its move's commit: doctor reads the commit
        wait_until(lambda: "claim" not in p.run("doctor").stdout.replace("claims", ""), "doctor to find no claim")
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=60)


def test_a_persons_state_claim_is_refused_in_words_for_a_mail_client(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    (p.dir / "roles" / "spec-reviewer.md").write_text(REVIEWER)
    p = Project(p.dir, App(load_config(p.dir / "workflow.toml", env={})))
    send = make_transport(p.app.config, p.app.deliverer, "direct").send

    def raw(event: str) -> bytes:
        return (
            "From: spec-reviewer@workflow.local\r\nTo: spec-writer@workflow.local\r\nSubject: user-auth\r\n"
            f"X-Event-Type: {event}\r\nX-Workflow-State: todo\r\nX-Artifacts: specs/proposed/user-auth.md\r\n\r\nok\r\n"
        ).encode()

    with pytest.raises(GuardrailError) as refused:
        send(raw("question"), "spec-reviewer@workflow.local", ["spec-writer@workflow.local"])
    assert "from a mail client" in str(refused.value) and "workflow move" not in str(refused.value)
    # an approval claiming the state it decides on is the person's decision: delivered, then applied
    assert send(raw("approval"), "spec-reviewer@workflow.local", ["spec-writer@workflow.local"])
