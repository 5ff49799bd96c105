"""The SMTP server with real clients: codes, rule names, durability, limits, hostile input."""

from __future__ import annotations

import os
import re
import shutil
import smtplib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from email.utils import parsedate_to_datetime

import pytest

from helpers.project import TESTER, TESTER_PASSWORD, Project, with_smtp
from helpers.smtp import auth_plain, client, message, serving
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.mail.message import parse, to_lf


@pytest.fixture
def smtp(project: Project) -> Iterator[int]:
    with BackgroundServer(project.app.config, project.app.deliverer) as port:
        yield port


def send(
    port: int, raw: bytes, sender: str = "spec-writer@workflow.local", to: list[str] | None = None
) -> dict[str, tuple[int, bytes]]:
    with client(port) as s:
        return s.sendmail(sender, to or ["spec-reviewer@workflow.local"], raw)


def test_smtplib_delivers_byte_exact(project: Project, smtp: int) -> None:
    raw = message(body="Ünïcode body\n" + "x" * 2000 + "\n")
    send(smtp, raw)
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == to_lf(raw)  # stored with LF line ends, as Maildir expects


@pytest.mark.parametrize(
    ("rcpt", "code", "needle"),
    [
        (
            "spec-reveiwer@workflow.local",
            550,
            "5.1.1 unknown address spec-reveiwer@workflow.local; did you mean spec-reviewer",
        ),
        ("spec-reviewer-panel-internal@workflow.local", 550, "5.7.1 rule internal-members-only"),
        ("someone@example.com", 550, "5.7.1 relaying denied"),
    ],
)
def test_rcpt_refusals_name_the_rule(project: Project, smtp: int, rcpt: str, code: int, needle: str) -> None:
    with pytest.raises(smtplib.SMTPRecipientsRefused) as e:
        send(smtp, message(), to=[rcpt])
    got_code, text = e.value.recipients[rcpt]
    assert got_code == code and needle in text.decode()
    assert project.new_files() == []


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (
            lambda r: r.replace(b"X-Event-Type: question", b"X-Event-Type: party"),
            "5.6.0 header X-Event-Type: unknown event type 'party'",
        ),
        (
            lambda r: r.replace(b"X-Artifacts: specs/*/user-auth.md", b"X-Artifacts: ../../etc/passwd"),
            "5.6.0 header X-Artifacts",
        ),
        (lambda r: r.replace(b"Subject: ", b"Subject: " + b"s" * 1200), "5.6.0 a header line is"),
        (lambda r: r.replace(b"From: spec-writer@", b"From: test-writer@"), "5.7.1 sender-matches-envelope"),
        (lambda r: r.replace(b"X-Event-Type: question", b"X-Event-Type: approval"), "5.7.1 reviewer-decisions"),
    ],
)
def test_data_refusals_name_header_and_rule(project: Project, smtp: int, mutate: object, needle: str) -> None:
    with pytest.raises(smtplib.SMTPDataError) as e:
        send(smtp, mutate(message()))  # type: ignore[operator]
    assert e.value.smtp_code == 550 and needle in e.value.smtp_error.decode()
    assert project.new_files() == []


def test_missing_message_id_and_date_are_added(project: Project, smtp: int) -> None:
    raw = b"From: spec-writer@workflow.local\r\nTo: spec-reviewer@workflow.local\r\nSubject: plain\r\n\r\nhi\r\n"
    sent = time.time()
    send(smtp, raw)
    send(smtp, raw)  # within the same second: the time parts are shared, the ids are not
    stored = [f.read_bytes() for f in project.new_files("spec-reviewer")]
    assert len(stored) == 2 and all(s.endswith(to_lf(raw)) and b"\r" not in s for s in stored)
    ids = set()
    for p in map(parse, stored):  # the documented form: <YYYYMMDDHHMMSS.<12 hex>.<role>@<domain>>
        assert p.message_id and re.fullmatch(r"<\d{14}\.[0-9a-f]{12}\.spec-writer@workflow\.local>", p.message_id)
        ids.add(p.message_id)
        assert abs(parsedate_to_datetime(p.get("Date")).timestamp() - sent) < 5, p.get("Date")
    assert len(ids) == 2


def test_size_limit_is_552(project_factory: Callable[..., Project]) -> None:
    p = project_factory("")
    app = with_smtp(p, "max_message_size = 4096\n").app
    with BackgroundServer(app.config, app.deliverer) as port:
        with pytest.raises(smtplib.SMTPException) as e:
            send(port, message(body="y" * 8000))
        assert "552" in str(e.value)
        send(port, message())  # still serving
    assert len(p.new_files("spec-reviewer")) == 1


def test_long_body_lines_accepted_and_stored_as_received(project: Project, smtp: int) -> None:
    raw = message().replace(b"\r\n\r\nHello", b"\r\n\r\n" + b"L" * 5000 + b"\r\nHello").replace(b"7bit", b"8bit")
    send(smtp, raw)
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == to_lf(raw)  # stored with LF line ends, as Maildir expects


def test_multi_recipient_is_all_or_nothing(project: Project, smtp: int) -> None:
    (project.mail / "test-writer").mkdir(parents=True)
    (project.mail / "test-writer" / "new").write_text("a file where a directory should be")
    raw = message(to=("spec-reviewer", "test-writer"))
    with pytest.raises(smtplib.SMTPDataError) as e:
        send(smtp, raw, to=["spec-reviewer@workflow.local", "test-writer@workflow.local"])
    assert e.value.smtp_code == 451 and b"4.3.0" in e.value.smtp_error
    assert b"Error" not in e.value.smtp_error and b"errno" not in e.value.smtp_error.lower()
    assert project.new_files("spec-reviewer") == []
    assert list((project.mail / "spec-reviewer" / "tmp").iterdir()) == []
    (project.mail / "test-writer" / "new").unlink()
    send(smtp, raw, to=["spec-reviewer@workflow.local", "test-writer@workflow.local"])  # a retry succeeds
    assert len(project.new_files("spec-reviewer")) == len(project.new_files("test-writer")) == 1


@pytest.fixture(params=["1", "2"], ids=["one-process", "two-workers"])
def any_server(project: Project, request: pytest.FixtureRequest) -> Iterator[int]:
    with serving(project.app, request.param) as port:
        yield port


def test_the_server_writes_full_text_rows_once_it_is_quiet(project: Project, any_server: int) -> None:
    """A copy's full-text row is not on the path to its 250; the server writes it once it has been
    quiet for a moment, with no search to prompt it."""
    words = ("wombat", "quokka", "numbat")
    for w in words:
        send(any_server, message(body=f"the {w} was here\n"))
    deadline = time.monotonic() + 10
    while True:
        with project.app.index() as index:
            due, count = index.text_due(), index.count()
        if (due, count) == (0, 3) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (due, count) == (0, 3)
    with project.app.index() as index:
        for w in words:
            assert len(index.search(w)) == 1


def test_retry_after_lost_250_is_not_delivered_twice(project: Project, any_server: int) -> None:
    smtp = any_server
    raw = message()
    send(smtp, raw)
    with client(smtp) as s:
        s.ehlo()
        s.mail("spec-writer@workflow.local")
        s.rcpt("spec-reviewer@workflow.local")
        code, text = s.data(raw)
    assert code == 250 and b"duplicate" in text
    assert len(project.new_files("spec-reviewer")) == 1
    changed = raw.replace(b"Hello", b"Changed")
    with pytest.raises(smtplib.SMTPDataError, match="already delivered"):
        send(smtp, changed)


def _dialog(port: int, payload: bytes, wait: float = 0.5, quiet: float = 2.0) -> bytes:
    """Send ``payload`` raw, logged in as the owner right after its first EHLO line; what the server
    answered until it closed or said nothing for ``quiet`` seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        greeting = s.recv(1024)
        if payload.startswith(b"EHLO ") and b"\r\n" in payload:
            ehlo, rest = payload.split(b"\r\n", 1)
            payload = ehlo + b"\r\n" + auth_plain(greeting) + rest
        s.sendall(payload)
        time.sleep(wait)
        s.settimeout(quiet)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except TimeoutError:
            pass
        return out


def test_smuggling_one_message_per_data(project: Project, smtp: int) -> None:
    inner = message(sender="spec-writer", body="smuggled\n")
    raw = message(body="first\n").replace(b"first\r\n", b"first\n.\r\nMAIL FROM:<spec-writer@workflow.local>\r\n")
    payload = (
        b"EHLO x\r\nMAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\n"
        + raw
        + b"RCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\n"
        + inner
        + b".\r\nQUIT\r\n"
    )
    out = _dialog(smtp, payload)
    assert b"550 5.6.0 message contains a bare CR or LF" in out
    assert project.new_files() == []


def test_connection_cap_and_idle_timeout(project_factory: Callable[..., Project]) -> None:
    # trust-the-host mode: every connection is a sender, none is evicted for a newer one (test_logins)
    app = with_smtp(project_factory(""), 'max_connections = 2\ntimeout = 1.0\nauth = "off"\n').app
    with BackgroundServer(app.config, app.deliverer) as port:
        a = socket.create_connection(("127.0.0.1", port))
        b = socket.create_connection(("127.0.0.1", port))
        assert a.recv(100).startswith(b"220") and b.recv(100).startswith(b"220")
        c = socket.create_connection(("127.0.0.1", port))
        assert c.recv(100).startswith(b"421 4.7.0")
        c.close()
        # A slow client (slowloris) is cut off by the idle timeout.
        a.sendall(b"EHLO slow\r\n")
        a.settimeout(5)  # far beyond the server's 1 s idle timeout: recv raises if it never closes
        data = b""
        while True:
            chunk = a.recv(4096)
            if not chunk:
                break  # the server closed the idle connection
            data += chunk
        assert data.startswith(b"250-")
        for s in (a, b):
            s.close()
        time.sleep(0.2)
        # A client that keeps talking is never idle, however long it stays; once it stops, the
        # timeout counts from its last command.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as d:
            assert d.recv(100).startswith(b"220")
            for _ in range(6):  # 2.4 s in all, more than twice the timeout
                d.sendall(b"NOOP\r\n")
                assert d.recv(100).startswith(b"250"), "an active connection was closed"
                time.sleep(0.4)
            last = time.monotonic()
            assert d.recv(100) == b""  # closed once idle
            assert 0.4 <= time.monotonic() - last < 3, time.monotonic() - last
        send(port, message())


def test_hostile_input_never_kills_the_server(project: Project, smtp: int) -> None:
    import random

    rng = random.Random(1)
    payloads = [
        bytes(rng.randrange(256) for _ in range(2000)),
        b"EHLO x\nMAIL FROM:<a>\nRCPT TO:<b>\n",
        b"EHLO x\r\nMAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\n"
        + b"X-H: v\r\n" * 100_000
        + b"\r\nbody\r\n.\r\n",
        b"EHLO x\r\nMAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\nFrom: \x00\x00\r\n\r\n\x00\r\n.\r\n",
        b"NOOP\r\n" * 500 + b"GARBAGE \xff\xfe\r\n" * 100,
        b"EHLO x\r\nMAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\nSubject: cut",
    ]
    for data in payloads:  # the client hangs up on the server mid-answer too: the next checks say it lives
        _dialog(smtp, data, wait=0.2, quiet=0.3)
    for _ in range(20):  # connect and drop
        s = socket.create_connection(("127.0.0.1", smtp))
        s.close()
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None)
    @given(st.binary(max_size=600))
    def fuzz(blob: bytes) -> None:
        with socket.create_connection(("127.0.0.1", smtp), timeout=5) as s:
            greeting = s.recv(1024)
            s.sendall(
                b"EHLO f\r\n"
                + auth_plain(greeting)
                + b"MAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\n"
                + blob
            )

    fuzz()
    assert project.new_files() == []
    send(smtp, message())
    assert len(project.new_files("spec-reviewer")) == 1


@pytest.mark.skipif(shutil.which("swaks") is None, reason="swaks not installed (scripts/system-packages installs it)")
def test_swaks_delivers_and_is_refused_with_the_rule(project: Project, smtp: int) -> None:
    base = ["swaks", "--server", f"127.0.0.1:{smtp}", "--from", "spec-writer@workflow.local", "--helo", "test"]
    base += ["--auth", "PLAIN", "--auth-user", TESTER, "--auth-password", TESTER_PASSWORD]
    ok = subprocess.run(
        base
        + [
            "--to",
            "spec-reviewer@workflow.local",
            "--header",
            "X-Event-Type: question",
            "--header",
            "Subject: from swaks",
            "--body",
            "hi",
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout
    assert "250 2.0.0" in ok.stdout
    bad = subprocess.run(base + ["--to", "spec-reviewer-panel-internal@workflow.local"], capture_output=True, text=True)
    assert bad.returncode != 0 and "550 5.7.1 rule internal-members-only" in bad.stdout
    [f] = project.new_files("spec-reviewer")
    assert parse(f.read_bytes()).subject == "from swaks"


@pytest.mark.skipif(
    shutil.which("notmuch") is None, reason="notmuch not installed (scripts/system-packages installs it)"
)
def test_notmuch_finds_what_the_server_wrote(project: Project, smtp: int, tmp_path: object) -> None:

    raw = message(mid="<served.1@workflow.local>")
    send(smtp, raw)
    cfg = project.dir / "nm-config"
    cfg.write_text(f"[database]\npath={project.mail}\n")
    env = {**os.environ, "NOTMUCH_CONFIG": str(cfg)}
    subprocess.run(["notmuch", "new", "--quiet"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        ["notmuch", "search", "--output=files", "id:served.1@workflow.local"], env=env, capture_output=True, text=True
    )
    assert "/spec-reviewer/new/" in out.stdout


def test_smtputf8_and_8bitmime_stored_byte_exact(project: Project, smtp: int) -> None:
    raw = (
        "Date: Thu, 26 Nov 2026 03:00:00 +0000\r\nFrom: spec-writer@workflow.local\r\nTo: spec-reviewer@workflow.local\r\nSubject: Grüße — 認証\r\n"
        "Message-ID: <utf8.1@workflow.local>\r\nX-Event-Type: question\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Transfer-Encoding: 8bit\r\n\r\nÜnïcödé body\r\n"
    ).encode()
    with client(smtp) as s:
        s.ehlo()
        assert s.has_extn("smtputf8") and s.has_extn("8bitmime")
        s.sendmail(
            "spec-writer@workflow.local",
            ["spec-reviewer@workflow.local"],
            raw,
            mail_options=["SMTPUTF8", "BODY=8BITMIME"],
        )
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == to_lf(raw)  # stored with LF line ends, as Maildir expects
    assert parse(raw).subject == "Grüße — 認証"


def test_dot_stuffing_empty_lines_and_pipelined_commands(project: Project, smtp: int) -> None:
    raw = message(body=".leading dot\n..two dots\n.\nend.\n")
    send(smtp, raw)  # smtplib dot-stuffs; the server must undo exactly that
    [f] = project.new_files("spec-reviewer")
    assert f.read_bytes() == to_lf(raw)  # stored with LF line ends, as Maildir expects
    second = message(body="pipelined\n")
    stuffed = second.replace(b"\r\n.", b"\r\n..")
    out = _dialog(
        smtp,
        b"EHLO p\r\nMAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\n"
        b"DATA\r\n" + stuffed + b".\r\nQUIT\r\n",
    )
    assert b"250 2.0.0 " in out and out.rstrip().endswith(b"221 Bye")
    assert any(p.read_bytes() == to_lf(second) for p in project.new_files("spec-reviewer"))


def test_a_refusal_at_data_logs_the_refused_messages_own_message_id(
    project: Project, smtp: int, caplog: pytest.LogCaptureFixture
) -> None:
    raw = message().replace(b"X-Event-Type: question", b"X-Event-Type: party")
    mid = parse(raw).message_id
    assert mid
    with caplog.at_level("INFO", logger="workflow.delivery.server.smtpd"), pytest.raises(smtplib.SMTPDataError):
        send(smtp, raw)
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and refused[0].startswith("refused DATA from 127.0.0.1 login=tester code=550 rule=-: ")
    assert f": {mid} from spec-writer@workflow.local to spec-reviewer@workflow.local: " in refused[0], refused
