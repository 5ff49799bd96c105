"""Humans as roles from any mail client: a real Dovecot serves each login its role's Maildir, the
reply goes through our server with the same login and lands threaded; logins see nothing else."""

from __future__ import annotations

import imaplib
import os
import re
import shutil
import smtplib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.dovecot import available
from helpers.project import Project, users_project
from workflow.delivery.credentials import hash_password
from workflow.delivery.smtpd import BackgroundServer
from workflow.mail.message import Draft, build, make_message_id, parse

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))
NOBODY = 65534


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served() -> Iterator[tuple[Project, int, Path]]:
    """A project whose mail root belongs to an ordinary user (nobody), with logins alice (user) and
    bob (spec-writer), served by a Dovecot made by `workflow imap --write`."""
    base = Path(tempfile.mkdtemp(prefix="imap-"))  # pytest's tmp dirs are 0700: Dovecot's users cannot enter
    os.chmod(base, 0o755)
    p = users_project(base, f"alice:{hash_password('wonderland')}:user\nbob:{hash_password('builder')}:spec-writer\n")
    p.send("spec-reviewer", "question", "specs/proposed/user-auth.md", "user", QUESTION="Expire or refresh?")
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(p.mail)], check=True)
    port = _port()
    conf_dir = base / "imap"
    r = p.run("imap", "--write", str(conf_dir), "--port", str(port))
    assert r.returncode == 0, r.stderr
    assert f"alice: reads {p.mail / 'user'} (role user)" in r.stdout
    subprocess.run(["dovecot", "-c", str(conf_dir / "dovecot.conf")], check=True)
    try:
        end = time.monotonic() + 20
        while True:
            try:
                imaplib.IMAP4("127.0.0.1", port, timeout=2).logout()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        yield p, port, conf_dir
    finally:
        subprocess.run(["doveadm", "-c", str(conf_dir / "dovecot.conf"), "stop"], check=False, capture_output=True)
        log = conf_dir / "dovecot.log"
        print(log.read_text() if log.exists() else "no dovecot log")  # shown when a test fails
        shutil.rmtree(base, ignore_errors=True)


def test_a_human_reads_its_role_over_imap_and_replies_through_smtp_threaded(served: tuple[Project, int, Path]) -> None:
    p, port, conf_dir = served
    c = imaplib.IMAP4("127.0.0.1", port, timeout=10)
    with pytest.raises(imaplib.IMAP4.error):
        c.login("alice", "wrong")
    c.shutdown()
    c = imaplib.IMAP4("127.0.0.1", port, timeout=10)
    c.login("alice", "wonderland")
    typ, data = c.select("INBOX")
    assert typ == "OK" and data[0] == b"1"
    typ, fetched = c.fetch("1", "(RFC822)")
    original = parse(fetched[0][1])  # type: ignore[index]
    assert original.event == "question" and original.sender == "spec-reviewer@workflow.local"
    c.logout()

    reply = build(
        Draft(
            sender="user@workflow.local",
            to=["spec-reviewer@workflow.local"],
            subject="Re: " + original.subject,
            body="Refresh tokens, please.\n",
            message_id=make_message_id("user", "workflow.local"),
            event="answer",
            artifacts=list(original.artifacts),
            in_reply_to=original.message_id,
            references=[original.message_id],
        )
    )
    with BackgroundServer(p.app.config, p.app.deliverer) as smtp_port:
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=10) as s:
            s.login("alice", "wonderland")  # the same login as IMAP
            s.sendmail("user@workflow.local", ["spec-reviewer@workflow.local"], reply)
    [stored] = p.new_files("spec-reviewer")
    answer = parse(stored.read_bytes())
    assert answer.in_reply_to == original.message_id and answer.sender == "user@workflow.local"
    r = p.run("thread", original.message_id, "--as", "spec-reviewer")
    assert r.returncode == 0, r.stderr
    assert "Refresh tokens, please." in r.stdout and "Expire or refresh?" in r.stdout
    # Dovecot kept its own files out of the Maildir
    assert sorted(x.name for x in (p.mail / "user").iterdir()) == ["cur", "new", "tmp"]


def test_a_second_human_sees_none_of_the_first_ones_mailboxes(served: tuple[Project, int, Path]) -> None:
    p, port, _ = served
    c = imaplib.IMAP4("127.0.0.1", port, timeout=10)
    c.login("bob", "builder")
    typ, data = c.select("INBOX")
    assert typ == "OK" and data[0] == b"0"
    typ, listing = c.list()
    names = [re.sub(rb'^.*"/" ', b"", line).strip(b'"').decode() for line in listing if isinstance(line, bytes)]
    assert names == ["INBOX"], listing
    for other in ("user", "../user", f"{p.mail}/user", "~alice"):
        typ, _ = c.select(f'"{other}"')
        assert typ != "OK", other
    c.logout()
