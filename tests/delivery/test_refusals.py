"""Refusals in the server's log: every refused AUTH, MAIL, RCPT and DATA is one line naming the
client's address, the login, the command, the code and the rule, with nothing a client sent able
to break or forge a line; failed logins and 530s are slowed per address; the fail2ban filter in
contrib/ matches the failed logins of a real server's log, and nothing a logged-in client did."""

from __future__ import annotations

import base64
import logging
import re
import shutil
import smtplib
import subprocess
import time
from pathlib import Path

import pytest

from helpers.project import ROOT, TESTER, make_project, users_project
from helpers.smtp import client, message, server_process
from workflow.delivery.credentials import hash_password
from workflow.delivery.server.smtpd import BackgroundServer

LINE = re.compile(r"^refused (AUTH|MAIL|RCPT|DATA) from 127\.0\.0\.1 login=(\S+) code=(\d{3}) rule=(\S+): (.+)$")
FILTER = ROOT / "contrib" / "fail2ban" / "filter.d" / "workflow-smtpd.conf"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_every_refusal_is_one_line_naming_address_login_command_code_and_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = users_project(tmp_path, f"alice:{hash_password('wonderland', 'salt', 1)}:spec-writer\n")
    caplog.set_level(logging.INFO, logger="workflow.delivery.server.smtpd")
    with BackgroundServer(p.app.config, p.app.deliverer) as port, smtplib.SMTP("127.0.0.1", port, timeout=30) as s:
        s.ehlo()
        t0 = time.monotonic()
        assert s.mail("spec-writer@workflow.local")[0] == 530  # not logged in
        forged = "mallory\r\n12:00:00 smtpd: refused AUTH from 10.9.9.9"
        assert s.docmd("AUTH", "PLAIN " + b64(f"\0{forged}\0guess"))[0] == 535
        assert s.docmd("AUTH", "LOGIN " + b64("alice"))[0] == 334
        assert s.docmd(b64("wrong"))[0] == 535
        slowed = time.monotonic() - t0
        s.login("alice", "wonderland")
        assert s.mail("spec-reviewer@workflow.local")[0] == 550  # alice sends as spec-writer only
        assert s.mail("spec-writer@workflow.local")[0] == 250
        assert s.rcpt("spec-reveiwer@workflow.local")[0] == 550
        assert s.rcpt("spec-reviewer-panel-internal@workflow.local")[0] == 550
        assert s.rcpt("spec-reviewer@workflow.local")[0] == 250
        approval = message(event="approval").replace(b"X-Event-Type: question", b"X-Event-Type: approval")
        assert s.data(approval)[0] == 550  # a writer may not approve
    assert slowed >= 0.25 + 0.5 + 1.0  # the 530 and both failed logins waited, each longer
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]
    assert all("\n" not in ln and "\r" not in ln for ln in lines), lines
    got = [LINE.match(ln) for ln in lines]
    assert all(got), lines
    assert [m.groups()[:4] for m in got if m] == [
        ("MAIL", "-", "530", "-"),
        ("AUTH", "mallory??12:00:00?smtpd:?refused?AUTH?from?10.9.9.9", "535", "-"),
        ("AUTH", "alice", "535", "-"),
        ("MAIL", "alice", "550", "sender-identity"),
        ("RCPT", "alice", "550", "-"),
        ("RCPT", "alice", "550", "internal-members-only"),
        ("DATA", "alice", "550", "reviewer-decisions"),
    ], lines
    assert lines[0].endswith("auth_users_file login; 1 failure(s) from this peer lately"), lines[0]
    assert lines[1].endswith(": PLAIN login failed; 2 failure(s) from this peer lately"), lines[1]
    assert (
        " rule=reviewer-decisions: <" in lines[6]
        and " to spec-reviewer@workflow.local: reviewer-decisions: " in lines[6]
    )
    assert "unknown address spec-reveiwer@workflow.local; did you mean spec-reviewer" in lines[4]
    assert p.new_files() == []


@pytest.mark.skipif(shutil.which("fail2ban-regex") is None, reason="fail2ban-regex (Debian fail2ban) not installed")
def test_the_fail2ban_filter_matches_a_real_servers_failed_logins_only(tmp_path: Path) -> None:
    p = make_project(tmp_path / "p")
    with server_process(p.dir) as (proc, port):
        with smtplib.SMTP("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0)) as guesser:
            guesser.ehlo()
            assert guesser.docmd("AUTH", "PLAIN " + b64(f"\0{TESTER}\0wrong"))[0] == 535
            with pytest.raises(smtplib.SMTPSenderRefused):
                guesser.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
        with client(port) as s, pytest.raises(smtplib.SMTPRecipientsRefused):
            s.sendmail("spec-writer@workflow.local", ["nobody@workflow.local"], message())
        assert proc.stderr is not None
        lines: list[str] = []
        while len(lines) < 3:  # each refusal is logged before it is answered
            line = proc.stderr.readline()
            assert line, "the server ended"
            if " refused " in line:
                lines.append(line)
    assert [re.sub(r"^.* refused (\S+) from .*\n", r"\1", ln) for ln in lines] == ["AUTH", "MAIL", "RCPT"], lines
    log = tmp_path / "smtpd.log"
    journal = [f"Nov 28 {ln[:8]} host env[4242]: {ln}" for ln in lines]  # as fail2ban reads journald
    log.write_text("".join(lines + journal))

    def regex(out: str) -> list[str]:
        r = subprocess.run(
            ["fail2ban-regex", "-o", out, str(log), str(FILTER)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.splitlines()

    assert regex("ip") == ["127.0.0.2"] * 4  # the failed login and the 530, in both forms; not the recipient
    assert all(" login=tester code=535 " in m or " login=- code=530 " in m for m in regex("msg"))
