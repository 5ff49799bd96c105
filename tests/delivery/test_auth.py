"""Authenticated senders: AUTH required by default, logins bound to the roles they may send as,
the owner's credential found by the CLI without a word, trust-the-host only when asked for."""

from __future__ import annotations

import os
import re
import shutil
import smtplib
import ssl
import stat
import subprocess
from pathlib import Path

import pytest

from helpers.project import TESTER, TESTER_PASSWORD, Project, make_project, users_project, with_smtp
from helpers.smtp import client, message
from workflow.core.config import load_config
from workflow.core.errors import WorkflowError
from workflow.delivery.credentials import OWNER, client_credential, hash_password, load_users, owner_secret
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.mail.message import parse


def test_an_unauthenticated_submission_is_refused_with_530(project: Project) -> None:
    with BackgroundServer(project.app.config, project.app.deliverer) as port:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            with pytest.raises(smtplib.SMTPSenderRefused) as e:
                s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
    assert e.value.smtp_code == 530 and e.value.smtp_error.startswith(b"5.7.0 Authentication required")
    assert project.new_files() == []


def test_an_auth_file_login_sends_as_its_roles_only(tmp_path: Path) -> None:
    p = users_project(tmp_path, f"# logins\nalice:{hash_password('wonderland')}:user\n")
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            with pytest.raises(smtplib.SMTPAuthenticationError):
                s.login("alice", "wrong")
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.login("alice", "wonderland")
            with pytest.raises(smtplib.SMTPSenderRefused) as e:
                s.sendmail(
                    "spec-reviewer@workflow.local",
                    ["spec-writer@workflow.local"],
                    message("spec-reviewer", ("spec-writer",), "approval"),
                )
            assert e.value.smtp_code == 550
            assert e.value.smtp_error.decode() == (
                "5.7.1 sender-identity: login alice may send as user only, not spec-reviewer"
            )
            s.sendmail("user@workflow.local", ["spec-reviewer@workflow.local"], message("user", ("spec-reviewer",)))
    [f] = p.new_files("spec-reviewer")
    assert parse(f.read_bytes()).sender == "user@workflow.local"
    assert p.new_files("spec-writer") == []


def test_a_users_file_naming_an_unknown_role_is_refused_at_start(tmp_path: Path) -> None:
    p = users_project(tmp_path, f"bob:{hash_password('x')}:spec-reviewr\n")
    users = tmp_path / "users"
    r = p.run("smtpd", "--port", "0")
    assert r.returncode != 0
    assert f"{users}: login bob: unknown sender role 'spec-reviewr'" in r.stderr
    assert "did you mean spec-reviewer" in r.stderr


def test_a_users_file_line_that_is_not_a_login_names_its_line(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('x')}:user\n~owner:{hash_password('x')}\n")
    with pytest.raises(WorkflowError, match=r"users:2: '~owner' is not a login"):
        load_users(str(users))


def test_a_login_on_two_lines_is_refused_naming_both(tmp_path: Path) -> None:
    """The reproduction: appending a new line for an existing login (to change its password) left
    Dovecot taking the first line's password and this server the last's."""
    users = tmp_path / "users"
    users.write_text(
        f"alice:{hash_password('old')}:user\nbob:{hash_password('b')}:user\nalice:{hash_password('new')}:user\n"
    )
    with pytest.raises(WorkflowError, match=r"users:3: login alice is on line 1 already"):
        load_users(str(users))


def test_the_owner_credential_is_made_on_first_use_mode_0600_and_refused_when_others_can_read_it(
    tmp_path: Path,
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    secret = owner_secret(env)
    path = tmp_path / "cfg" / "workflow" / "credentials"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert owner_secret(env) == secret and client_credential(env) == (OWNER, secret)
    os.chmod(path, 0o644)
    with pytest.raises(WorkflowError, match="readable by others; run: chmod 600"):
        owner_secret(env)


def test_the_human_at_the_shell_sends_through_the_server_with_no_extra_step(project: Project) -> None:
    with BackgroundServer(project.app.config, project.app.deliverer, port=project.app.config.smtp.port):
        r = project.run(
            "review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=hi", tool="workflow-notify"
        )
        assert r.returncode == 0, r.stderr
        assert f"(smtp: {project.app.config.state.socket})" in r.stderr, r.stderr
        r = project.run(
            "notify", "--via", "smtp", "question", "specs/proposed/user-auth.md", "spec-writer", "QUESTION=why?"
        )
        assert r.returncode == 0, r.stderr
    assert len(project.new_files("spec-reviewer")) == 1 and len(project.new_files("spec-writer")) == 1


def test_auth_off_is_trust_the_host(project_factory: object) -> None:
    p = with_smtp(project_factory('\n[runs]\nsandbox = "none"\n'), 'auth = "off"\n')  # type: ignore[operator]
    app = p.app
    with BackgroundServer(app.config, app.deliverer) as port:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.sendmail(
                "spec-reviewer@workflow.local",
                ["spec-writer@workflow.local"],
                message("spec-reviewer", ("spec-writer",)),
            )
        with client(port) as s:  # a login still binds: the owner may send as anyone
            s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
    r = p.run("doctor")
    assert 'auth = "off"' in r.stdout and "trust-the-host" in r.stdout
    assert 'sandbox = "none"' in r.stdout and "advisory" in r.stdout


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed (it makes the test certificate)")
def test_a_remote_listener_offers_auth_only_after_starttls(tmp_path: Path) -> None:
    from workflow.delivery.server.listeners import check_bind

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=workflow.local"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    p = make_project(tmp_path / "p")
    with pytest.raises(WorkflowError, match=r"--allow-remote needs STARTTLS; set \[smtp\] tls_cert and tls_key"):
        check_bind("0.0.0.0", True, p.app.config)
    app = with_smtp(p, f'tls_cert = "{cert}"\ntls_key = "{key}"\n').app
    check_bind("0.0.0.0", True, app.config)
    with BackgroundServer(app.config, app.deliverer, host="0.0.0.0") as port:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.ehlo()
            assert not s.has_extn("auth") and s.has_extn("starttls")
            code, text = s.mail("spec-writer@workflow.local")
            assert code == 530, text
            s.starttls(context=ssl._create_unverified_context())
            s.ehlo()
            assert s.has_extn("auth")
            c = client_credential(mail_root=p.app.config.mail_root)
            with pytest.raises(smtplib.SMTPAuthenticationError):  # the owner logs in on the socket only
                s.login(c.login, c.secret)
            s.login(TESTER, TESTER_PASSWORD)
            s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
    assert len(p.new_files("spec-reviewer")) == 1


def test_a_second_projects_mail_never_lands_in_the_first_projects_maildirs(tmp_path: Path) -> None:
    """Two projects of one owner, one server running (A's) on the port B names too: B's notify
    goes to B's mail root's socket, never to A's port — nothing of B's lands in A's Maildirs."""
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "b")
    with BackgroundServer(a.app.config, a.app.deliverer) as port:
        for p in (a, b):  # both name the port A's server listens on
            toml = (p.dir / "workflow.toml").read_text()
            (p.dir / "workflow.toml").write_text(re.sub(r"(?m)^port = \d+", f"port = {port}", toml))
        notify = ("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
        r = b.run("--via", "smtp", *notify, tool="workflow-notify")
        assert r.returncode != 0 and "no server runs for this mail root" in r.stderr, r.stderr
        r = b.run(*notify, tool="workflow-notify")
        assert r.returncode == 0 and "delivered directly" in r.stderr, r.stderr
        r = a.run("--via", "smtp", *notify, tool="workflow-notify")
        assert r.returncode == 0, r.stderr  # A's own owner gets in
    assert len(a.new_files("spec-reviewer")) == 1 and len(b.new_files("spec-reviewer")) == 1


def test_workflow_init_gives_each_project_a_port_of_its_own(tmp_path: Path) -> None:
    from workflow.ops.scaffold import init

    ports = set()
    for name in ("one", "two", "three"):
        init(tmp_path / name, mail_root=str(tmp_path / f"{name}-mail"), hooks=False, env={})
        ports.add(load_config(tmp_path / name / "workflow.toml", env={}).smtp.port)
    assert len(ports) == 3 and all(20000 <= p < 40000 for p in ports)
