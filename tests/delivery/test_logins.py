"""Logins from the attacker's side: a program squatting on the project's port never gets the
owner's secret or mail; guessing is cut off, slowed and logged, and costs the loop nothing;
unknown logins cost what known ones do; connections that never log in cannot keep the owner out;
a busy server's 421 is never taken for "nothing listens"."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import smtplib
import socket
import statistics
import threading
import time
from pathlib import Path

import pytest

from helpers.project import Project, users_project, with_smtp
from helpers.smtp import client, message
from workflow.core.errors import TransportError
from workflow.delivery import handshake
from workflow.delivery.credentials import (
    Authenticator,
    User,
    client_credential,
    hash_password,
    owner_secret,
    root_id,
)
from workflow.delivery.smtpd import BackgroundServer


def test_the_handshake_hmac_is_rfc_2104() -> None:
    for key in (b"", b"k", b"x" * 64, b"y" * 200):
        assert handshake.hmac_sha256(key, b"message") == hmac.new(key, b"message", hashlib.sha256).digest()


class Squatter:
    """A program on the project's port while no server runs there: it speaks like a workflow-mail
    server (the greeting names the mail root, AUTH offers X-WORKFLOW and PLAIN) and records all."""

    def __init__(self, root: str, mode: str) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.root, self.mode = root, mode
        self.heard = b""
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as f:
                f.write(f"220 workflow.local ESMTP workflow-mail smtpd, mail root {self.root}\r\n".encode())
                f.flush()
                proof_next = in_data = False
                while line := f.readline():
                    self.heard += line
                    word = line.split(b" ")[0].upper().strip()
                    if in_data:
                        in_data = line != b".\r\n"
                        reply = b"" if in_data else b"250 2.0.0 stored"
                    elif proof_next:  # it never had the key: its "proof" is made up
                        proof_next, reply = False, b"235 2.7.0 Authentication successful " + b"0" * 64
                    elif word == b"EHLO":
                        reply = b"250-workflow.local\r\n250-AUTH LOGIN PLAIN X-WORKFLOW\r\n250 HELP"
                    elif word == b"AUTH" and b"X-WORKFLOW" in line.upper() and self.mode == "plain-only":
                        reply = b"504 5.5.4 Unrecognized authentication type"
                    elif word == b"AUTH" and b"X-WORKFLOW" in line.upper():
                        proof_next, reply = True, b"334 " + base64.b64encode(b"cd" * 16)
                    elif word == b"AUTH":
                        reply = b"235 2.7.0 Authentication successful"
                    elif word == b"DATA":
                        in_data, reply = True, b"354 go ahead"
                    elif word == b"QUIT":
                        f.write(b"221 bye\r\n")
                        break
                    else:
                        reply = b"250 2.0.0 ok"
                    if reply:
                        f.write(reply + b"\r\n")
                        f.flush()

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize("mode", ["forged-proof", "plain-only"])
def test_a_program_squatting_on_the_port_gets_neither_the_owners_secret_nor_the_mail(
    project: Project, mode: str
) -> None:
    config = project.app.config
    squatter = Squatter(root_id(config.mail_root), mode)
    toml = project.dir / "workflow.toml"
    toml.write_text(toml.read_text().replace(f"port = {config.smtp.port}", f"port = {squatter.port}"))
    env = {"XDG_CONFIG_HOME": str(project.dir.parent / "cfg")}
    secret = owner_secret(env)
    try:
        # the fast path (XNOTIFY) is refused, so the full command tries too: both log in, neither sends
        r = project.run(
            "question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify", env=env
        )
        assert r.returncode == TransportError.exit_code, r.stdout + r.stderr
        assert "could not prove it is this project's workflow smtpd" in r.stderr, r.stderr
    finally:
        squatter.close()
    heard = squatter.heard
    plain = base64.b64encode(f"\0{client_credential(env, config.mail_root).login}\0{secret}".encode())
    assert secret.encode() not in heard and plain not in heard and b"AUTH PLAIN" not in heard.upper()
    assert b"MAIL FROM" not in heard.upper() and b"XNOTIFY" not in heard.upper() and b"DATA" not in heard.upper()
    assert project.new_files() == []  # and nothing was delivered some other way behind the owner's back


def test_guessing_is_cut_off_after_three_failures_slowed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = users_project(tmp_path, f"alice:{hash_password('wonderland')}:user\n")
    caplog.set_level(logging.INFO, logger="workflow.delivery.smtpd")
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        s = smtplib.SMTP("127.0.0.1", port, timeout=30)
        s.ehlo()
        t0 = time.monotonic()
        answers = []
        for guess in ("a", "b", "c"):
            code, text = s.docmd("AUTH", "PLAIN " + base64.b64encode(f"\0alice\0{guess}".encode()).decode())
            answers.append((code, text.decode()))
        took = time.monotonic() - t0
        assert [c for c, _ in answers] == [535, 535, 421], answers
        assert "3 failed logins" in answers[-1][1]
        with pytest.raises((smtplib.SMTPServerDisconnected, OSError)):
            s.noop()  # the connection is closed
        assert took >= 0.25 + 0.5 + 1.0  # each failure from the peer waits longer
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as ok:  # the right password still works
            ok.login("alice", "wonderland")
    refusals = [r.getMessage() for r in caplog.records if "AUTH PLAIN refused for alice" in r.getMessage()]
    assert len(refusals) == 3 and all("peer 127.0.0.1" in m for m in refusals), refusals


def test_an_unknown_login_costs_what_a_known_one_does(tmp_path: Path) -> None:
    users = {"alice": User(hash_password("wonderland"), ("user",))}
    auth = Authenticator(tmp_path, users, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})

    def cost(login: str) -> float:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert auth.check(login, "guess") is None
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    known, unknown = cost("alice"), cost("mallory")
    assert unknown > 0.5 * known, (known, unknown)  # the decoy: no enumeration by timing


def test_a_password_check_never_stalls_other_clients(tmp_path: Path) -> None:
    rounds = 2_000_000  # a login whose check takes about a second of PBKDF2
    p = users_project(tmp_path, f"slow:{hash_password('pw', rounds=rounds)}:user\n")
    t0 = time.perf_counter()
    hash_password("x", rounds=rounds)
    one_check = time.perf_counter() - t0
    with BackgroundServer(p.app.config, p.app.deliverer) as port, client(port) as owner:
        started = threading.Event()

        def guess() -> None:
            with smtplib.SMTP("127.0.0.1", port, timeout=60) as s:
                s.ehlo()
                started.set()
                s.docmd("AUTH", "PLAIN " + base64.b64encode(b"\0slow\0wrong").decode())

        t = threading.Thread(target=guess)
        t.start()
        started.wait(10)
        time.sleep(one_check / 4)  # the check is under way
        t1 = time.perf_counter()
        assert owner.noop()[0] == 250
        waited = time.perf_counter() - t1
        t.join(60)
    assert waited < one_check / 3, (waited, one_check)


def test_connections_that_never_log_in_cannot_keep_the_owner_out(project: Project) -> None:
    p = with_smtp(project, "max_connections = 4\nlogin_timeout = 2.0\n")
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        squatters = []
        for _ in range(4):  # every place taken by connections that talk but never log in
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            assert s.recv(200).startswith(b"220")
            s.sendall(b"NOOP\r\n")
            assert s.recv(200).startswith(b"250")
            squatters.append(s)
        with client(port) as owner:  # the owner still gets in: it takes the oldest waiting one's place
            owner.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
            first = squatters[0].recv(200)
            assert first.startswith(b"421 4.7.0 too many connections waiting to log in"), first
            for s in squatters[1:]:  # the rest are closed when their time to log in is up
                s.settimeout(10)
                assert s.recv(200).startswith(b"421 4.7.0 no login in time")
            assert owner.noop()[0] == 250  # logged in: no deadline
        for s in squatters:
            s.close()
    assert len(p.new_files("spec-reviewer")) == 1


def test_a_busy_servers_421_is_never_taken_for_nothing_listens(project: Project) -> None:
    p = with_smtp(project, "max_connections = 1\n")
    with BackgroundServer(p.app.config, p.app.deliverer) as port, client(port):  # the one place, logged in
        toml = p.dir / "workflow.toml"
        toml.write_text(toml.read_text().replace(f"port = {p.app.config.smtp.port}", f"port = {port}"))
        r = p.run("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify")
    assert r.returncode != 0 and "421" in r.stderr, r.stderr
    assert "delivered directly" not in r.stdout + r.stderr
    assert p.new_files("spec-reviewer") == []
