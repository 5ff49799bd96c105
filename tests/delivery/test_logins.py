"""Logins from the attacker's side: a program squatting on the project's port, or asking to join
it, never hears from the owner's commands; the owner's login is never taken on TCP; guessing is
cut off, slowed and logged, and costs the loop nothing; unknown logins cost what known ones do;
connections that never log in, or a run's login, cannot keep people or the owner out; a busy
server's 421 is never taken for "nothing listens"."""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import hmac
import logging
import smtplib
import socket
import threading
import time
from pathlib import Path

import pytest

from helpers.project import Project, users_project, with_smtp
from helpers.smtp import client, message, server_process
from helpers.smtp import owner as owner_client
from workflow.delivery import handshake, transport
from workflow.delivery.credentials import (
    Authenticator,
    User,
    client_credential,
    hash_password,
    root_id,
)
from workflow.delivery.server.protocol import PER_RUN
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.staging import OPEN, RunBox, token_digest
from workflow.delivery.transport import LocalSMTP


def test_the_handshake_hmac_is_rfc_2104() -> None:
    for key in (b"", b"k", b"x" * 64, b"y" * 200):
        assert handshake.hmac_sha256(key, b"message") == hmac.new(key, b"message", hashlib.sha256).digest()


class Squatter:
    """A program on the project's TCP port: it speaks like a workflow-mail server (the greeting
    names the mail root, AUTH offers X-WORKFLOW and PLAIN), takes anything, and records all."""

    def __init__(self, root: str, port: int = 0, reuse_port: bool = False) -> None:
        self.listener = socket.socket()
        if reuse_port:
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            self.listener.bind(("127.0.0.1", port))
            self.listener.listen()
        except OSError:
            self.listener.close()
            raise
        self.port = self.listener.getsockname()[1]
        self.root = root
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
                while line := f.readline():
                    self.heard += line
                    f.write(b"250 ok\r\n")
                    f.flush()

    def close(self) -> None:
        self.listener.close()


def test_a_program_on_the_projects_port_never_hears_from_the_owners_commands(project: Project) -> None:
    """The owner's commands talk to the server's socket in the state directory, never to the
    TCP port: a program squatting on it (no server running, or beside one) gets nothing to relay."""
    config = project.app.config
    squatter = Squatter(root_id(config.mail_root), port=config.smtp.port)
    notify = ("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?")
    try:
        r = project.run(*notify, tool="workflow-notify")  # no server: delivered directly
        assert r.returncode == 0 and "delivered directly" in r.stderr, r.stderr
        with BackgroundServer(config, project.app.deliverer, tcp=False):
            r = project.run(*notify, tool="workflow-notify")  # the server on its socket: it gets it
            assert r.returncode == 0 and f"(smtp: {config.state.socket})" in r.stderr, r.stderr
            r = project.run("notify", "--via", "smtp", *notify)
            assert r.returncode == 0, r.stderr
    finally:
        squatter.close()
    assert squatter.heard == b""
    assert len(project.new_files("spec-reviewer")) == 3


def test_the_owners_login_is_refused_on_tcp_even_with_the_secret(project: Project) -> None:
    """On TCP the owner's X-WORKFLOW is not offered and its PLAIN is refused: an owner's
    connection there could be relayed, so none is ever taken."""
    c = client_credential(mail_root=project.app.config.mail_root)
    with BackgroundServer(project.app.config, project.app.deliverer) as port, smtplib.SMTP("127.0.0.1", port) as s:
        s.ehlo()
        assert "X-WORKFLOW" not in s.esmtp_features["auth"].upper()
        with pytest.raises(handshake.LoginError):
            transport.login(s, c.login, c.secret)
        with pytest.raises(smtplib.SMTPAuthenticationError):
            s.login(c.login, c.secret)
        code, _ = s.mail("spec-writer@workflow.local")
        assert code == 530


def test_no_program_can_join_the_servers_port_and_take_a_share_of_its_connections(project: Project) -> None:
    """`workflow smtpd --workers 2` listens without SO_REUSEPORT: a program of the same uid that
    asks for it cannot bind the port beside the workers (it would be handed people's logins)."""
    with server_process(project.dir, "--workers", "2") as (_, port):
        with pytest.raises(OSError) as e:
            Squatter(root_id(project.app.config.mail_root), port=port, reuse_port=True)
        assert e.value.errno == errno.EADDRINUSE
        with client(port) as s:  # and the workers serve
            assert s.noop()[0] == 250


def test_guessing_is_cut_off_after_three_failures_slowed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = users_project(tmp_path, f"alice:{hash_password('wonderland')}:user\n")
    caplog.set_level(logging.INFO, logger="workflow.delivery.server.smtpd")
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
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused AUTH from 127.0.0.1")]
    codes = [m.split(" code=")[1][:3] for m in refusals if " login=alice code=" in m and "PLAIN login failed" in m]
    assert codes == ["535", "535", "421"], refusals


def test_an_unknown_login_costs_what_a_known_one_does(tmp_path: Path) -> None:
    users = {"alice": User(hash_password("wonderland"), ("user",))}
    auth = Authenticator(tmp_path, users, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})

    def cost(login: str) -> float:
        t0 = time.perf_counter()
        assert auth.check(login, "guess") is None
        return time.perf_counter() - t0

    # interleaved rounds, the fastest of each: a busy machine only ever slows a check down, so the
    # minimum is the check's own cost whatever else the cores were doing meanwhile
    rounds = [(cost("alice"), cost("mallory")) for _ in range(7)]
    known, unknown = min(k for k, _ in rounds), min(u for _, u in rounds)
    assert unknown > 0.5 * known, (known, unknown)  # the decoy: no enumeration by timing


def test_a_password_check_never_stalls_other_clients(tmp_path: Path) -> None:
    rounds = 2_000_000  # a login whose check takes about a second of PBKDF2
    p = users_project(tmp_path, f"slow:{hash_password('pw', rounds=rounds)}:user\n")
    t0 = time.perf_counter()
    hash_password("x", rounds=rounds)
    one_check = time.perf_counter() - t0
    with BackgroundServer(p.app.config, p.app.deliverer) as port, owner_client(p.app) as owner:
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


def test_connections_that_never_log_in_cannot_keep_people_or_the_owner_out(project: Project) -> None:
    p = with_smtp(project, "max_connections = 4\nlogin_timeout = 4.0\n")
    with BackgroundServer(p.app.config, p.app.deliverer) as port, contextlib.ExitStack() as closing:
        squatters = []
        for _ in range(4):  # every place on TCP taken by connections that talk but never log in
            s = closing.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
            assert s.recv(200).startswith(b"220")
            s.sendall(b"NOOP\r\n")
            assert s.recv(200).startswith(b"250")
            squatters.append(s)
        with client(port) as person:  # a person still gets in: it takes a waiting one's place
            with owner_client(p.app) as owner:  # the owner's socket has places of its own
                owner.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
            person.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
            said = []
            for s in squatters:  # one gave its place; the rest are closed when their time to log in is up
                s.settimeout(10)
                said.append(s.recv(200)[: len("421 4.7.0 no login in time")])
            assert sorted(said) == [b"421 4.7.0 no login in time"] * 3 + [b"421 4.7.0 too many connect"], said
            assert person.noop()[0] == 250  # logged in: no deadline
    assert len(p.new_files("spec-reviewer")) == 2


def test_a_runs_login_cannot_fill_the_owners_socket(project: Project) -> None:
    """An agent holding its run's token opens connection after connection on the socket and logs
    each in: past PER_RUN it is refused, and the owner still gets in."""
    p = with_smtp(project, f"max_connections = {PER_RUN + 2}\n")
    token = "t" * 40
    run = p.app.config.state.runs / "spec-writer.run"
    run.mkdir(parents=True)
    RunBox(run).write_info({"state": OPEN, "role": "spec-writer", "token_sha256": token_digest(token)})
    path = str(p.app.config.state.runs_socket)
    with BackgroundServer(p.app.config, p.app.deliverer):
        held = []
        for _ in range(PER_RUN):
            s = LocalSMTP(path, 10)
            transport.login(s, "~run/spec-writer", token)
            held.append(s)
        extra = LocalSMTP(path, 10)
        with pytest.raises(handshake.LoginError) as e:
            transport.login(extra, "~run/spec-writer", token)
        assert e.value.code == 421 and f"holds {PER_RUN} connections already" in str(e.value)
        with owner_client(p.app) as owner:
            assert owner.noop()[0] == 250
        for s in held:
            s.close()
        extra.close()


def test_a_busy_servers_421_is_never_taken_for_nothing_listens(project: Project) -> None:
    p = with_smtp(project, "max_connections = 1\n")
    with BackgroundServer(p.app.config, p.app.deliverer), owner_client(p.app):  # the one place, logged in
        r = p.run("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify")
    assert r.returncode != 0 and "421" in r.stderr, r.stderr
    assert "delivered directly" not in r.stdout + r.stderr
    assert p.new_files("spec-reviewer") == []


def test_a_new_login_a_new_password_and_a_removed_login_count_without_a_restart(tmp_path: Path) -> None:
    def line(login: str, password: str, role: str) -> str:
        return f"{login}:{hash_password(password, rounds=1000)}:{role}\n"

    p = users_project(tmp_path, line("alice", "wonderland", "user"))
    users = tmp_path / "users"

    def logs_in(port: int, login: str, password: str) -> bool:
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as s:
            s.ehlo()
            s.user, s.password = login, password
            try:
                s.auth("PLAIN", s.auth_plain)  # one try (login() tries LOGIN too, and each failure waits longer)
                return True
            except smtplib.SMTPAuthenticationError:
                return False

    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        assert logs_in(port, "alice", "wonderland")
        users.write_text(line("alice", "looking-glass", "user") + line("carol", "carrots", "spec-reviewer"))
        assert logs_in(port, "carol", "carrots") and logs_in(port, "alice", "looking-glass")
        users.write_text(line("carol", "carrots", "spec-reviewer"))  # alice removed
        assert not logs_in(port, "alice", "looking-glass")
        users.write_text("carol:not-a-secret:spec-reviewer\n")  # a bad edit refuses everyone until mended
        assert not logs_in(port, "carol", "carrots")


def test_a_login_removed_or_changed_ends_on_the_connections_that_made_it(tmp_path: Path) -> None:
    """The reproduction: a login removed from the users file kept sending on a connection it had
    opened before (a NOOP every 30 s kept it alive), and its typed approval was applied."""

    def line(login: str, password: str, role: str) -> str:
        return f"{login}:{hash_password(password, rounds=1000)}:{role}\n"

    p = users_project(tmp_path, line("dave", "d-pass", "spec-reviewer") + line("erin", "e-pass", "spec-reviewer"))
    users = tmp_path / "users"
    raw = b"From: spec-reviewer@workflow.local\r\nTo: spec-writer@workflow.local\r\nSubject: hi\r\n\r\nhi\r\n"
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        dave = smtplib.SMTP("127.0.0.1", port, timeout=30)
        erin = smtplib.SMTP("127.0.0.1", port, timeout=30)
        for s, who in ((dave, "dave"), (erin, "erin")):
            s.ehlo()
            s.user, s.password = who, f"{who[0]}-pass"
            s.auth("PLAIN", s.auth_plain)
        dave.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], raw)  # fine while it stands
        users.write_text(line("erin", "e-new", "spec-reviewer"))  # dave removed, erin's password changed
        for s, who in ((dave, "dave"), (erin, "erin")):
            with pytest.raises(smtplib.SMTPSenderRefused) as e:
                s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], raw)
            assert e.value.smtp_code == 530 and f"login {who} is no longer valid" in e.value.smtp_error.decode()
            s.close()
    assert len(p.new_files("spec-writer")) == 1


def test_guesses_on_many_connections_at_once_are_answered_one_after_another(tmp_path: Path) -> None:
    """The reproduction: 60 connections from one address got 180 guesses answered in 10 s, each
    connection waiting its own delay beside the others. A peer's failures now queue: three at once
    take at least the three delays one after another (0.25 + 0.5 + 1 s), not the longest of them."""
    p = users_project(tmp_path, f"alice:{hash_password('right', rounds=1000)}:user\n")
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        conns = []
        for _ in range(3):
            s = smtplib.SMTP("127.0.0.1", port, timeout=30)
            s.ehlo()
            s.user, s.password = "alice", "wrong"
            conns.append(s)
        answered: list[float] = []

        def guess(s: smtplib.SMTP) -> None:
            with contextlib.suppress(smtplib.SMTPAuthenticationError):
                s.auth("PLAIN", s.auth_plain)
            answered.append(time.monotonic())

        start = time.monotonic()
        threads = [threading.Thread(target=guess, args=(s,)) for s in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        for s in conns:
            s.close()
    assert len(answered) == 3 and max(answered) - start >= 1.6, [a - start for a in answered]
