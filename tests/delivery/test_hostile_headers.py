"""Holes hostile input found, each from its reproduction: reply headers with several ids, From:
display-name tricks, loopback judged by address, and replies racing the index's lag."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.project import Project, with_smtp
from helpers.smtp import client, message
from workflow.core.errors import MessageError, VisibilityError
from workflow.delivery import submit, xnotify
from workflow.delivery.credentials import client_credential
from workflow.delivery.server.listeners import is_loopback
from workflow.delivery.server.smtpd import BackgroundServer

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


def test_references_are_checked_in_linear_time_and_a_header_block_past_the_cap_is_refused(
    project: Project,
) -> None:
    """References of 40,000 ids (1.1 MB) blocked a worker for 18 s (a list's ``in`` per id): a
    header block past 256 KiB is refused at once, and under it every id is still checked — an
    internal id at the very middle of 9,000 is found."""
    import smtplib

    mid = internal(project)
    many = [f"<r{i}.x@elsewhere.example>" for i in range(40_000)]
    refs = many[:9_000]
    refs.insert(4_500, mid)
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port, timeout=5) as s:
        with pytest.raises(smtplib.SMTPDataError) as e:
            s.sendmail(
                "spec-reviewer-panel.claude@workflow.local",
                ["spec-writer@workflow.local"],
                raw("spec-reviewer-panel.claude", "spec-writer", references=many),
            )
        assert e.value.smtp_code == 550 and b"the header block is" in e.value.smtp_error
        hostile = raw("spec-reviewer-panel.claude", "spec-writer", references=refs)
        with pytest.raises(smtplib.SMTPDataError) as e:  # answered within the client's 5 s, and refused
            s.sendmail("spec-reviewer-panel.claude@workflow.local", ["spec-writer@workflow.local"], hostile)
        assert e.value.smtp_code == 550 and b"internal-thread-stays-inside" in e.value.smtp_error
        clean = raw("spec-reviewer-panel.claude", "spec-writer", references=refs[:4_500] + refs[4_501:])
        s.sendmail("spec-reviewer-panel.claude@workflow.local", ["spec-writer@workflow.local"], clean)
    assert len(project.new_files("spec-writer")) == 1


def test_a_template_that_renders_for_too_long_is_refused_and_the_server_serves_meanwhile(project: Project) -> None:
    """XNOTIFY's template renders off the event loop for at most ``[smtp] render_timeout``."""
    p = with_smtp(project, "render_timeout = 0.5\n")
    slow = '{% for i in "x" * 1000 %}{% for j in "y" * 100000 %}{% endfor %}{% endfor %}{{ QUESTION }}\n'
    (p.dir / "email-templates").mkdir(exist_ok=True)
    (p.dir / "email-templates" / "question.txt").write_text(slow)
    owner = client_credential(mail_root=p.app.config.mail_root)
    req = xnotify.Request(
        "question", "specs/proposed/user-auth.md", "spec-reviewer", "spec-writer", "", ("QUESTION=Why?",)
    )
    with BackgroundServer(p.app.config, p.app.deliverer) as port:
        with pytest.raises(submit.RefusedError, match=r"451 4.3.0 composing the notification took longer than 0.5 s"):
            submit.submit(str(p.app.config.state.socket), 30, owner.login, owner.secret, req)
        with client(port) as other:  # the render still runs in its thread; the server answers
            assert other.noop()[0] == 250
    assert p.new_files("spec-reviewer") == []


def nested_mime(depth: int) -> bytes:
    """A message of ``depth`` multipart containers, each inside the last (82 KB at 1,200)."""
    head = raw("spec-writer", "spec-reviewer").split(b"\r\n\r\n", 1)[0]
    head = b"\r\n".join(ln for ln in head.split(b"\r\n") if not ln.lower().startswith((b"content-", b"mime-")))
    body = [b"MIME-Version: 1.0", b"Content-Type: multipart/mixed; boundary=b0", b""]
    for i in range(depth - 1):
        body += [f"--b{i}".encode(), f"Content-Type: multipart/mixed; boundary=b{i + 1}".encode(), b""]
    body += [f"--b{depth - 1}".encode(), b"Content-Type: text/plain", b"", b"the question, deep down"]
    body += [f"--b{i}--".encode() for i in reversed(range(depth))]
    return head + b"\r\n" + b"\r\n".join(body) + b"\r\n"


def test_mime_nested_past_the_limit_is_refused_at_data_and_never_crashes_a_reader(
    project: Project, tmp_path: Path
) -> None:
    import smtplib

    from workflow.mail.body import body_text

    hostile = nested_mime(1200)
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port) as s:
        with pytest.raises(smtplib.SMTPDataError) as e:
            s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], hostile)
        assert e.value.smtp_code == 550 and b"more than 100 multipart parts" in e.value.smtp_error
        s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], nested_mime(5))
    [kept] = project.new_files("spec-reviewer")
    assert "the question, deep down" in body_text(kept.read_bytes())
    # a copy that predates the limit (or came another way): every reader copes, none raises
    assert body_text(hostile).startswith("[body not shown")
    box = project.mail / "spec-reviewer" / "new"
    (box / "1700000000.M1P1.old").write_bytes(hostile)
    for args in (("reindex",), ("inbox", "spec-reviewer"), ("search", "deep", "--as", "spec-reviewer")):
        r = project.run(*args)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
    r = project.run("run-role", "--dry-run", "--with-email", "spec-reviewer")
    assert r.returncode == 0 and "[body not shown" in r.stdout, r.stderr[-2000:]
