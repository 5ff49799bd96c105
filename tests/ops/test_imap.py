"""Humans as roles from any mail client, as docs/mail-clients.md says: a non-root owner runs
`workflow imap --write` and the start line it prints (a rootless Dovecot, no sudo), logins read
their role's Maildir and reply through `workflow smtpd` threaded, see nothing else, and cannot
put mail into a Maildir around the server; a new login or password counts without a restart."""

from __future__ import annotations

import imaplib
import json
import os
import re
import shutil
import smtplib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.dovecot import available
from helpers.owner import Owner, owner, unavailable
from helpers.project import Project, make_project, with_smtp
from workflow.delivery.credentials import hash_password
from workflow.mail.message import Draft, build, make_message_id, parse

pytestmark = [
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
]
CONF_DIR = "~/.config/workflow/imap"  # as the docs write it
USERS = "~/.config/workflow/users"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _users(alice: str = "wonderland", more: str = "") -> str:
    line = "{}:{}:{}\n"
    return (
        line.format("alice", hash_password(alice, rounds=1000), "user")
        + line.format("bob", hash_password("builder", rounds=1000), "spec-writer")
        + more
    )


@dataclass
class Served:
    p: Project
    port: int  # Dovecot's
    smtp_port: int  # the owner's `workflow smtpd`
    o: Owner
    imap_dir: Path

    def roles_mail(self, role: str) -> list[str]:
        """Every folder and message of a role's Maildir (a message by its unique name: Dovecot
        moves it from new/ to cur/ and adds flags)."""
        box = self.p.mail / role
        return sorted(f.name.split(":2,")[0] if f.is_file() else f"{f.relative_to(box)}/" for f in box.rglob("*"))


def _wait_for(port: int, proc: subprocess.Popen[str] | None = None) -> None:
    end = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > end or (proc is not None and proc.poll() is not None):
                raise
            time.sleep(0.05)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """A project owned by an ordinary user whose users file is ~/.config/workflow/users (0600 in
    the 0700 directory workflow makes), alice (role user) and bob (spec-writer); the owner runs
    `workflow smtpd` and the Dovecot `workflow imap --write` made, by the printed lines."""
    base = Path(tempfile.mkdtemp(prefix="imap-"))  # pytest's tmp dirs are 0700: the owner could not enter
    os.chmod(base, 0o755)
    with owner(base) as o:
        p = with_smtp(make_project(base / "p"), f'auth_users_file = "{USERS}"\n')
        p.send("spec-reviewer", "question", "specs/proposed/user-auth.md", "user", QUESTION="Expire or refresh?")
        cfg = o.home / ".config" / "workflow"
        cfg.mkdir(parents=True, mode=0o700)
        (cfg / "users").write_text(_users())
        os.chmod(cfg / "users", 0o600)
        o.own(base / "p", o.home)
        port, smtp_port = _port(), _port()
        smtpd = o.popen(f"workflow smtpd --port {smtp_port} --workers 1", p.dir)
        stop = ""
        try:
            r = o.sh(f"workflow imap --write {CONF_DIR} --port {port}", p.dir)
            assert r.returncode == 0, r.stderr
            assert f"alice: reads {p.mail / 'user'} (role user)" in r.stdout
            start = re.search(r"^start: (.*)$", r.stdout, re.M)
            stopped = re.search(r"^stop: (.*)$", r.stdout, re.M)
            assert start and stopped, r.stdout
            stop = stopped[1]
            s = o.sh(start[1], p.dir)  # as printed, by the owner, with a user's PATH
            assert s.returncode == 0, s.stdout + s.stderr
            _wait_for(port)
            _wait_for(smtp_port, smtpd)
            yield Served(p, port, smtp_port, o, o.home / ".config" / "workflow" / "imap")
        finally:
            if stop:
                s = o.sh(stop, p.dir)
                assert s.returncode == 0, s.stdout + s.stderr
            print(o.stop(smtpd))  # shown when a test fails
            log = o.home / ".config" / "workflow" / "imap" / "dovecot.log"
            print(log.read_text() if log.exists() else "no dovecot log")
    shutil.rmtree(base, ignore_errors=True)


def _login(s: Served, login: str, password: str) -> imaplib.IMAP4:
    c = imaplib.IMAP4("127.0.0.1", s.port, timeout=10)
    try:
        c.login(login, password)
    except imaplib.IMAP4.error:
        c.shutdown()
        raise
    return c


def test_a_human_reads_its_role_over_imap_and_replies_through_smtp_threaded(served: Served) -> None:
    s = served
    c = _login(s, "alice", "wonderland")
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
    with smtplib.SMTP("127.0.0.1", s.smtp_port, timeout=10) as smtp:
        smtp.login("alice", "wonderland")  # the same login as IMAP
        smtp.sendmail("user@workflow.local", ["spec-reviewer@workflow.local"], reply)
    [stored] = s.p.new_files("spec-reviewer")
    answer = parse(stored.read_bytes())
    assert answer.in_reply_to == original.message_id and answer.sender == "user@workflow.local"
    r = s.o.sh(f"workflow thread '{original.message_id}' --as spec-reviewer", s.p.dir)
    assert r.returncode == 0, r.stderr
    assert "Refresh tokens, please." in r.stdout and "Expire or refresh?" in r.stdout
    # Dovecot kept its own files out of the Maildir, and the logins file stays the owner's only
    assert sorted(x.name for x in (s.p.mail / "user").iterdir()) == ["cur", "new", "tmp"]
    assert (s.o.home / ".config" / "workflow").stat().st_mode & 0o077 == 0
    assert (s.o.home / ".config" / "workflow" / "users").stat().st_mode & 0o077 == 0


def test_a_second_human_sees_none_of_the_first_ones_mailboxes(served: Served) -> None:
    c = _login(served, "bob", "builder")
    with pytest.raises(imaplib.IMAP4.readonly):  # spec-writer is an agent role: bob reads, never marks
        c.select("INBOX")
    sent = served.o.sh(  # by the owner, as the owner's files are made
        "workflow notify --from spec-reviewer question specs/proposed/user-auth.md spec-writer QUESTION=Why",
        served.p.dir,
    )
    assert sent.returncode == 0, sent.stderr
    typ, data = c.select("INBOX", readonly=True)
    assert typ == "OK" and data[0] == b"1"
    assert c.fetch("1", "(RFC822)")[0] == "OK"
    c.store("1", "+FLAGS", "\\Seen")  # whatever the answer, nothing is marked
    copies = [f.name for sub in ("new", "cur") for f in (served.p.mail / "spec-writer" / sub).iterdir()]
    assert len(copies) == 1 and "S" not in copies[0].partition(":2,")[2], copies  # the agent's copy: still unread
    typ, listing = c.list()
    names = [re.sub(rb'^.*"/" ', b"", line).strip(b'"').decode() for line in listing if isinstance(line, bytes)]
    assert names == ["INBOX"], listing
    for other in ("user", "../user", f"{served.p.mail}/user", "~alice"):
        typ, _ = c.select(f'"{other}"')
        assert typ != "OK", other
    c.logout()


FORGED = (
    b"From: spec-writer@workflow.local\r\nTo: user@workflow.local\r\nSubject: forged\r\n"
    b"Message-ID: <forged@workflow.local>\r\nX-Event-Type: review-request\r\n"
    b"X-Artifacts: specs/proposed/user-auth.md\r\n\r\nnever passed the server\r\n"
)


def test_mail_clients_cannot_put_mail_into_a_role_around_the_server(served: Served, tmp_path: Path) -> None:
    s = served
    before = s.roles_mail("user")
    c = _login(s, "alice", "wonderland")
    assert c.append("INBOX", None, None, FORGED)[0] == "NO"  # APPEND: an mbsync push, a client's Fcc
    assert c.create("Sent")[0] == "NO"  # a client's Sent folder would be a Maildir inside the role's
    c.select("INBOX")
    assert c.copy("1", "INBOX")[0] == "NO"
    c.logout()

    local = tmp_path / "local"
    for sub in ("cur", "new", "tmp"):
        (local / "INBOX" / sub).mkdir(parents=True)
    (local / "INBOX" / "new" / "1.forged").write_bytes(FORGED)
    rc = tmp_path / "mbsyncrc"
    rc.write_text(
        f"IMAPAccount a\nHost 127.0.0.1\nPort {s.port}\nUser alice\nPass wonderland\nSSLType None\n"
        "AuthMechs LOGIN\n\nIMAPStore remote\nAccount a\n\n"
        f"MaildirStore local\nPath {local}/\nInbox {local}/INBOX\n\n"
        "Channel push\nFar :remote:\nNear :local:\nPatterns INBOX Sent\nSync Push\nCreate Far\n"
    )
    for d in (local, local / "INBOX", *(local / "INBOX").iterdir()):  # mbsync waits out a Maildir changed this second
        os.utime(d, (time.time() - 10, time.time() - 10))
    if shutil.which("mbsync"):  # a push of a local folder: APPEND, and CREATE for Sent
        m = subprocess.run(["mbsync", "-c", str(rc), "-a"], capture_output=True, text=True, timeout=30)
        assert "refuses to store" in m.stdout + m.stderr, m.stdout + m.stderr
    assert s.roles_mail("user") == before  # nothing new in the role's Maildir, no .Sent
    r = s.o.sh("workflow inbox user --all --json", s.p.dir)
    assert r.returncode == 0, r.stderr
    threads = json.dumps(json.loads(r.stdout)["threads"])
    assert "question" in threads and "review-request" not in threads and "forged" not in threads, threads


def test_a_human_marks_read_and_deletes_its_roles_mail(served: Served) -> None:
    s = served
    s.p.send("spec-writer", "status-update", "specs/proposed/user-auth.md", "user", STATUS="drafting")
    s.o.own(s.p.mail)
    c = _login(s, "alice", "wonderland")
    typ, data = c.select("INBOX")
    last = data[0].decode()  # type: ignore[union-attr]
    assert c.store(last, "+FLAGS", "\\Seen")[0] == "OK"
    assert c.fetch(last, "(FLAGS)")[1][0] and b"\\Seen" in c.fetch(last, "(FLAGS)")[1][0]  # type: ignore[operator]
    assert [f for f in (s.p.mail / "user" / "cur").iterdir() if f.name.endswith(":2,S")]
    count = len(s.p.new_files("user"))
    assert c.store(last, "+FLAGS", "\\Deleted")[0] == "OK"
    assert c.expunge()[0] == "OK"
    c.logout()
    assert len(s.p.new_files("user")) == count - 1


def test_a_new_login_and_a_new_password_count_without_a_restart(served: Served) -> None:
    s = served
    users = s.o.home / ".config" / "workflow" / "users"
    carol = "{}:{}:{}\n".format("carol", hash_password("carrots", rounds=1000), "spec-reviewer")
    users.write_text(_users(alice="looking-glass", more=carol))  # as an editor would: same file, new text
    r = s.o.sh(f"workflow imap --write {CONF_DIR} --port {s.port}", s.p.dir)  # the documented step for a new login
    assert r.returncode == 0 and "carol: reads" in r.stdout, r.stderr

    # Dovecot looks at a passwd-file's time at most once a second: wait for the next second
    time.sleep(1.05 - time.time() % 1)
    c = _login(s, "carol", "carrots")  # a new login, through the users file and the new homes
    assert c.select("INBOX", readonly=True)[0] == "OK"  # spec-reviewer: an agent role, read-only
    c.logout()
    _login(s, "alice", "looking-glass").logout()  # a new password, read from the users file itself

    with smtplib.SMTP("127.0.0.1", s.smtp_port, timeout=10) as smtp:  # the same smtpd, never restarted
        smtp.login("carol", "carrots")
    with smtplib.SMTP("127.0.0.1", s.smtp_port, timeout=10) as smtp:
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.login("alice", "wonderland")
