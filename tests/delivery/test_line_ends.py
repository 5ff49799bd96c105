"""Line ends: copies are stored with LF (Maildir's convention); CRLF copies stored before still read,
a retry still matches them; the wire stays CRLF; a server-added Message-ID has the documented form."""

from __future__ import annotations

import json
import os
import re
import shutil
import smtplib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.project import Project
from helpers.smtp import client, message
from workflow.delivery.credentials import client_credential
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import SmtpTransport
from workflow.mail.message import parse

SERVER_ID = re.compile(r"^<\d{14}\.[0-9a-f]{12}\.spec-writer@workflow\.local>$")


@pytest.fixture
def smtp(project: Project) -> Iterator[int]:
    with BackgroundServer(project.app.config, project.app.deliverer) as port:
        yield port


def send(port: int, raw: bytes, sender: str = "spec-writer@workflow.local") -> None:
    with client(port) as s:
        s.sendmail(sender, ["spec-reviewer@workflow.local"], raw)


def old_copy(project: Project, raw: bytes) -> Path:
    """A copy stored before this change: CRLF bytes in the Maildir, as the server wrote them then."""
    box = Path(project.app.maildirs.ensure("spec-reviewer"))
    f = box / "new" / "1700000000.M1P1R00.old"
    f.write_bytes(raw)
    return f


def test_smtp_mail_is_stored_with_lf(project: Project, smtp: int) -> None:
    raw = message(mid="<lf.1@workflow.local>", body="one\ntwo\n")
    assert b"\r\n" in raw
    send(smtp, raw)
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == raw.replace(b"\r\n", b"\n") and b"\r" not in f.read_bytes()


@pytest.mark.skipif(
    not (shutil.which("mshow") and shutil.which("notmuch")),
    reason="mblaze or notmuch not installed (scripts/system-packages installs them)",
)
def test_mail_clients_show_no_cr(project: Project, smtp: int) -> None:
    send(smtp, message(mid="<lf.2@workflow.local>", body="one\ntwo\n"))
    [f] = project.new_files("spec-reviewer")
    out = subprocess.run(["mshow", str(f)], capture_output=True, check=True).stdout  # mblaze
    assert b"one\ntwo" in out and b"\r" not in out
    cfg = project.dir / "nm-config"
    cfg.write_text(f"[database]\npath={project.mail}\n")
    env = {**os.environ, "NOTMUCH_CONFIG": str(cfg)}
    subprocess.run(["notmuch", "new", "--quiet"], env=env, check=True, capture_output=True)
    out = subprocess.run(["notmuch", "show", "id:lf.2@workflow.local"], env=env, capture_output=True).stdout
    assert b"Subject: [question]" in out and b"one\ntwo" in out and b"\r" not in out


def test_direct_delivery_is_stored_with_lf(project: Project) -> None:
    project.app.deliverer.deliver(message(body="direct\n"), ["spec-reviewer@workflow.local"])
    [f] = project.new_files("spec-reviewer")
    assert b"\r" not in f.read_bytes() and f.read_bytes().endswith(b"\n\ndirect\n")


def test_a_retry_matches_an_old_crlf_copy_and_other_bytes_are_still_refused(project: Project) -> None:
    raw = message(mid="<old.1@workflow.local>")
    old = old_copy(project, raw)
    with project.app.index() as index:
        index.refresh(["spec-reviewer"])
    with BackgroundServer(project.app.config, project.app.deliverer) as smtp:
        retries(project, smtp, raw, old)


def retries(project: Project, smtp: int, raw: bytes, old: Path) -> None:
    send(smtp, raw)  # the client retries after a lost 250: CRLF on the wire, CRLF on disk
    assert project.new_files("spec-reviewer") == [old]
    with pytest.raises(smtplib.SMTPDataError) as e:
        send(smtp, message(mid="<old.1@workflow.local>", body="other\n"))
    assert e.value.smtp_code == 550 and b"different content" in e.value.smtp_error
    new = message(mid="<new.1@workflow.local>")
    send(smtp, new)
    send(smtp, new)  # stored with LF, retried with CRLF
    assert len(project.new_files("spec-reviewer")) == 2


def test_an_old_crlf_copy_still_reads(project: Project) -> None:
    old_copy(project, message(mid="<old.2@workflow.local>", body="first line\nsecond line\n"))
    r = project.run("inbox", "spec-reviewer")
    assert r.returncode == 0 and "<old.2@workflow.local>" in r.stdout and "\r" not in r.stdout, r.stderr
    r = project.run("read", "--as", "spec-reviewer", "--unread", "--json")
    [shown] = json.loads(r.stdout)
    assert shown["text"] == "first line\nsecond line\n" and shown["headers"]["Message-ID"] == "<old.2@workflow.local>"


def test_lf_bytes_go_out_as_crlf(project: Project, smtp: int) -> None:
    """What a run staged (LF, as stored) is sent to the server, which refuses a bare LF."""
    lf = message(mid="<wire.1@workflow.local>").replace(b"\r\n", b"\n")
    owner = client_credential(mail_root=project.app.config.mail_root)
    SmtpTransport(str(project.app.config.state.socket), 10, owner).send(
        lf, "spec-writer@workflow.local", ["spec-reviewer"]
    )
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == lf


def without_id(raw: bytes) -> bytes:
    return re.sub(rb"Message-ID: [^\r]*\r\n", b"", raw)


def test_a_server_added_message_id_names_the_senders_role(project: Project, smtp: int) -> None:
    send(smtp, without_id(message()), sender="Spec-Writer@WORKFLOW.local")
    project.app.deliverer.deliver(without_id(message()), ["spec-reviewer@workflow.local"])
    ids = [parse(f.read_bytes()).message_id or "" for f in project.new_files("spec-reviewer")]
    assert len(ids) == 2 and all(SERVER_ID.match(m) for m in ids), ids
