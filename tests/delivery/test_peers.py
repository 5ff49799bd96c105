"""Peers: another host's Postfix logs in to this host's real ``workflow smtpd`` with a login of its
own (``workflow users peer HOST``, never the owner's secret) and relays the mail of the roles that
live on that host, to the roles that live here — and nothing else. Every guardrail and
visibility rule is checked here again. Hosts are loopback addresses (127.0.0.2, 127.0.0.3)."""

from __future__ import annotations

import re
import smtplib
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.hosts import HOSTS, on_host
from helpers.project import TESTER, TESTER_PASSWORD, Project, make_project
from helpers.smtp import message, server_process

HUB = "127.0.0.2"


class Hub:
    def __init__(self, p: Project, port: int, secret: str) -> None:
        self.p, self.port, self.secret = p, port, secret

    def peer(self, login: str = "peer-build", secret: str | None = None) -> smtplib.SMTP:
        s = smtplib.SMTP(HUB, self.port, timeout=10, local_hostname="build")
        try:
            s.login(login, self.secret if secret is None else secret)
        except BaseException:
            s.close()
            raise
        return s

    def refused(self, s: smtplib.SMTP, raw: bytes, sender: str, to: list[str]) -> str:
        with pytest.raises((smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused, smtplib.SMTPDataError)) as e:
            s.sendmail(sender, to, raw)
        return str(e.value)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    """Host hub, serving: implementer lives on build, the rest on hub; build's peer login added."""
    p = make_project(tmp_path / "hub", HOSTS)
    on_host(p, "implementer", "build")
    assert p.run("host", "hub").returncode == 0
    r = p.run("users", "peer", "build")
    assert r.returncode == 0, r.stderr
    (secret,) = re.findall(r"secret \(shown once; for host build's relay to this host\): (\S+)", r.stdout)
    assert secret not in (p.dir / "tester-users").read_text()  # kept hashed only
    with server_process(p.dir) as (_, port):
        yield Hub(p, port, secret)


def test_a_peer_relays_its_hosts_roles_mail_to_this_hosts_roles(hub: Hub) -> None:
    with hub.peer() as s:
        s.sendmail(
            "implementer@workflow.local", ["spec-writer@workflow.local"], message("implementer", ("spec-writer",))
        )
    (copy,) = hub.p.new_files("spec-writer")
    assert b"From: implementer@workflow.local" in copy.read_bytes()


def test_a_peer_never_poses_as_a_role_of_this_host_nor_relays_onward(hub: Hub) -> None:
    with hub.peer() as s:
        said = hub.refused(
            s, message("spec-writer", ("coordinator",)), "spec-writer@workflow.local", ["coordinator@workflow.local"]
        )
        assert "login peer-build is host build's" in said and "spec-writer lives on hub" in said, said
        s.rset()
        said = hub.refused(
            s, message("implementer", ("implementer",)), "implementer@workflow.local", ["implementer@workflow.local"]
        )
        assert "relaying denied: implementer@workflow.local lives on build, not on hub" in said, said
        s.rset()
        said = hub.refused(s, message("implementer", ("x",)), "implementer@workflow.local", ["sam@example.com"])
        assert "relaying denied" in said, said
    assert hub.p.new_files() == []


def test_a_panel_internal_message_relayed_by_a_non_member_is_refused_here(hub: Hub) -> None:
    raw = message("implementer", ("spec-reviewer-panel-internal",), event="question")
    with hub.peer() as s:
        said = hub.refused(s, raw, "implementer@workflow.local", ["spec-reviewer-panel-internal@workflow.local"])
    assert "internal-members-only" in said, said
    # the same message addressed to a hub role, the internal address only in To:, is refused at DATA
    with hub.peer() as s:
        said = hub.refused(s, raw, "implementer@workflow.local", ["spec-writer@workflow.local"])
    assert "internal" in said, said
    assert hub.p.new_files() == []


def test_a_non_peer_is_refused_and_a_peer_login_is_its_own(hub: Hub) -> None:
    with smtplib.SMTP(HUB, hub.port, timeout=10) as s:  # no login: nothing is relayed
        said = hub.refused(
            s, message("implementer", ("spec-writer",)), "implementer@workflow.local", ["spec-writer@workflow.local"]
        )
        assert "530" in said, said
    with pytest.raises(smtplib.SMTPAuthenticationError):
        hub.peer(secret="not-the-secret")
    with smtplib.SMTP(HUB, hub.port, timeout=10) as s:  # a person's login is a person's, not a peer
        s.login(TESTER, TESTER_PASSWORD)
    with pytest.raises(smtplib.SMTPAuthenticationError):  # the owner's login is never taken on TCP
        hub.peer(login="~owner", secret="anything")
    r = hub.p.run("users", "peer", "build")
    assert r.returncode != 0 and "login peer-build is there already" in r.stderr
    r = hub.p.run("users", "peer", "hub")
    assert r.returncode != 0 and "hub is this host" in r.stderr
    r = hub.p.run("users", "peer", "nowhere")
    assert r.returncode != 0 and "'nowhere' is not a host" in r.stderr
    assert hub.p.new_files() == []


def test_a_peer_line_naming_no_host_stops_the_server_naming_it(tmp_path: Path) -> None:
    p = make_project(tmp_path / "hub", HOSTS)
    assert p.run("host", "hub").returncode == 0
    users = p.dir / "tester-users"
    line = users.read_text().splitlines()[0].split(":")
    users.write_text(users.read_text() + f"peer-x:{line[1]}:@nowhere\n")
    r = p.run("smtpd", "--port", "0")
    assert r.returncode != 0 and "login peer-x: @nowhere names no host; expected one of hub, build" in r.stderr, (
        r.stderr
    )


def test_only_a_roles_or_members_copy_is_handed_to_another_host(tmp_path: Path) -> None:
    """A bridge's mailbox (and the outbound spool) is where that bridge runs: never handed on."""
    from workflow.app import App
    from workflow.bridges.sections import SECTIONS
    from workflow.core.config import load_config
    from workflow.delivery import relay

    p = make_project(tmp_path / "hub", HOSTS)
    on_host(p, "implementer", "build")
    assert p.run("host", "hub").returncode == 0
    app = App(load_config(p.dir / "workflow.toml", env={}, plugins=SECTIONS))
    boxes = ["implementer", "spec-writer", "bridge-outbound", "bridge-slack", "spec-reviewer-panel.claude"]
    here, away = relay.elsewhere(app.config, app.roster, boxes)
    assert away == ("implementer",) and "bridge-outbound" in here and "bridge-slack" in here


def test_a_refused_null_sender_opens_no_transaction_for_a_forged_bounce(hub: Hub) -> None:
    """Reproduction (hostile round): a peer's refused MAIL FROM:<> left the envelope's sender set,
    so its RCPT and a crafted DSN were taken, as a blocker-report from any role it named."""
    for login, secret in (("peer-build", None), (TESTER, TESTER_PASSWORD)):
        with hub.peer(login, secret) as s:
            code, said = s.mail("")
            assert code == 550 and b"own relay only" in said, said
            code, said = s.rcpt("coordinator@workflow.local")
            assert code == 503, said  # no transaction: the refused MAIL opened none
            code, said = s.docmd("DATA")
            assert code == 503, said
    assert hub.p.new_files() == []
