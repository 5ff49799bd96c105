"""Holes hostile input found, each from its reproduction: reply headers with several ids, From:
display-name tricks, loopback judged by address, and replies racing the index's lag."""

from __future__ import annotations

import pytest

from helpers.project import Project
from helpers.smtp import client, message
from workflow.core.errors import MessageError, VisibilityError
from workflow.delivery.smtpd import BackgroundServer, is_loopback

INTERNAL = "spec-reviewer-panel-internal"


def raw(sender: str, to: str, **kw: object) -> bytes:
    return message(sender, (to,), **kw).replace(b"Subject: [question] user-auth", b"Subject: s")


def internal(p: Project) -> str:
    return p.app.deliverer.deliver(raw("spec-reviewer-panel.claude", INTERNAL), [INTERNAL]).message_id


def test_every_id_of_in_reply_to_is_checked(project: Project) -> None:
    mid = internal(project)
    hostile = raw("spec-reviewer-panel.claude", "spec-writer").replace(
        b"Subject: s", f"In-Reply-To: <other@x> {mid}\r\nSubject: s".encode()
    )
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside"):
        project.app.deliverer.deliver(hostile, ["spec-writer"])
    assert project.new_files("spec-writer") == []


def test_a_case_variant_of_an_internal_id_is_refused_too(project: Project) -> None:
    mid = internal(project)
    variant = mid.upper().replace("@WORKFLOW.LOCAL", "@workflow.local")
    assert variant != mid
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside"):
        project.app.deliverer.deliver(
            raw("spec-reviewer-panel.claude", "spec-writer", in_reply_to=variant, references=[variant]), ["spec-writer"]
        )


@pytest.mark.parametrize(
    "header", ["In-Reply-To: garbage", "In-Reply-To: <a@b> and more", "References: <a@b> <c", "In-Reply-To: <>"]
)
def test_malformed_reply_ids_are_refused(project: Project, header: str) -> None:
    bad = raw("spec-writer", "spec-reviewer").replace(b"Subject: s", f"{header}\r\nSubject: s".encode())
    with pytest.raises(MessageError, match="must be Message-IDs"):
        project.app.deliverer.deliver(bad, ["spec-reviewer"])


def test_from_is_parsed_as_a_mailbox_not_scanned(project: Project) -> None:
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port) as s:
        trick = raw("spec-reviewer", "spec-writer").replace(
            b"From: spec-reviewer@workflow.local", b'From: "spec-writer@workflow.local" <spec-reviewer@workflow.local>'
        )
        code, text = _send(s, "spec-writer@workflow.local", trick)
        assert code == 550 and b"sender-matches-envelope" in text and b"From: is spec-reviewer" in text
        honest = raw("spec-writer", "spec-reviewer").replace(
            b"From: spec-writer@workflow.local", b'From: "spec-reviewer@workflow.local" <spec-writer@workflow.local>'
        )
        code, text = _send(s, "spec-writer@workflow.local", honest, to="spec-reviewer@workflow.local")
        assert code == 250, text
        two = raw("spec-writer", "spec-reviewer").replace(
            b"From: spec-writer@workflow.local", b"From: spec-writer@workflow.local, spec-reviewer@workflow.local"
        )
        code, text = _send(s, "spec-writer@workflow.local", two, to="spec-reviewer@workflow.local")
        assert code == 550 and b"must name exactly one mailbox" in text
    assert len(project.new_files("spec-reviewer")) == 1 and project.new_files("spec-writer") == []


def _send(s: object, sender: str, data: bytes, to: str = "spec-writer@workflow.local") -> tuple[int, bytes]:
    import smtplib

    assert isinstance(s, smtplib.SMTP)
    s.rset()
    s.mail(sender)
    s.rcpt(to)
    return s.data(data)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("::1234", False),
        ("::100", False),
        ("localhost.attacker.example", False),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback_is_judged_by_address_not_by_prefix(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_200_internal_then_outside_replies_on_one_connection_store_nothing_outside(project: Project) -> None:
    """The index is filled after the 250; a reply sent at once must still see the internal copy."""
    import smtplib

    refused = 0
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port) as s:
        for _ in range(200):
            inner = raw("spec-reviewer-panel.claude", INTERNAL)
            s.sendmail("spec-reviewer-panel.claude@workflow.local", [f"{INTERNAL}@workflow.local"], inner)
            mid = next(line for line in inner.split(b"\r\n") if line.startswith(b"Message-ID:")).split(b" ", 1)[1]
            leak = raw("spec-reviewer-panel.claude", "spec-writer", in_reply_to=mid.decode(), references=[mid.decode()])
            try:
                s.sendmail("spec-reviewer-panel.claude@workflow.local", ["spec-writer@workflow.local"], leak)
            except smtplib.SMTPDataError as e:
                assert e.smtp_code == 550 and b"internal-thread-stays-inside" in e.smtp_error
                refused += 1
    assert refused == 200
    assert project.new_files("spec-writer") == []
    assert len(project.new_files("spec-reviewer-panel.claude")) == 200


def test_forty_thousand_references_are_checked_in_linear_time_and_an_internal_one_still_refuses(
    project: Project,
) -> None:
    """References of 40,000 ids (1.1 MB) blocked a worker for 18 s (a list's ``in`` per id); every
    id is still checked: an internal id at the very middle is found."""
    import smtplib

    mid = internal(project)
    refs = [f"<r{i}.x@elsewhere.example>" for i in range(40_000)]
    refs.insert(20_000, mid)
    hostile = raw("spec-reviewer-panel.claude", "spec-writer", references=refs)
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port, timeout=5) as s:
        with pytest.raises(smtplib.SMTPDataError) as e:  # answered within the client's 5 s (it took 9), and refused
            s.sendmail("spec-reviewer-panel.claude@workflow.local", ["spec-writer@workflow.local"], hostile)
        assert e.value.smtp_code == 550 and b"internal-thread-stays-inside" in e.value.smtp_error
        clean = raw("spec-reviewer-panel.claude", "spec-writer", references=refs[:20_000] + refs[20_001:])
        s.sendmail("spec-reviewer-panel.claude@workflow.local", ["spec-writer@workflow.local"], clean)
    assert len(project.new_files("spec-writer")) == 1
