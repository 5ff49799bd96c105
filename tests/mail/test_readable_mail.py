"""Readable mail end to end: an HTML-only question and a mail with attachments, delivered by the real
server, as `workflow read`, the role's agent context, its read tool and `workflow search` show them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

import pytest

from helpers.project import Project
from helpers.smtp import client
from workflow.agents.context import build
from workflow.agents.tools import RoleTools
from workflow.core.errors import ToolError
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import make_transport
from workflow.mail.inbox import select

QUESTION = "Should refresh tokens expire after 30 days?"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def composed(mid: str, html: str) -> EmailMessage:
    """What an HTML composer sends: a text/html body and no text/plain part."""
    m = EmailMessage()
    m["From"] = '"Bob Example" <spec-writer@workflow.local>'
    m["To"] = "spec-reviewer@workflow.local"
    m["Subject"] = "[question] user-auth"
    m["Date"] = format_datetime(datetime.now(UTC))
    m["Message-ID"] = mid
    m["X-Event-Type"] = "question"
    m["X-Artifacts"] = "specs/*/user-auth.md"
    m.set_content(html, subtype="html")
    return m


@pytest.fixture
def delivered(project: Project) -> Iterator[tuple[str, str]]:
    """An HTML-only question and an HTML mail with a text and a PNG attachment, sent over SMTP."""
    question = composed(
        "<html-q@example.org>",
        f"<html><head><style>.x{{}}</style></head><body><div><p>Hello,</p><p><b>{QUESTION.replace('30 ', '30&nbsp;')}"
        "</b></p><p>See <a href='https://example.org/rfc6749'>RFC 6749</a></p></div></body></html>",
    )
    files = composed("<html-att@example.org>", "<p>Logs attached.</p>")
    files.add_attachment("ERROR token expired at 12:00\n", filename="server.log")
    files.add_attachment(PNG, maintype="image", subtype="png", filename="graph.png")
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port) as s:
        for m in (question, files):
            s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], m.as_bytes(policy=SMTP))
    yield "<html-q@example.org>", "<html-att@example.org>"


def test_an_html_only_question_is_read_by_people_agents_and_search(
    project: Project, delivered: tuple[str, str]
) -> None:
    question, _ = delivered
    r = project.run("read", question, "--as", "spec-reviewer", "--peek")
    assert r.returncode == 0, r.stderr
    assert QUESTION.replace("30 ", "30\xa0") in r.stdout and "See RFC 6749 (https://example.org/rfc6749)" in r.stdout
    assert "<p>" not in r.stdout and ".x{" not in r.stdout
    app = project.app
    role = app.roster.roles["spec-reviewer"]
    boxes = app.roster.mailboxes_of("spec-reviewer")
    with app.index() as index:
        index.refresh()
        ctx = build(app, role, index, select(index, boxes))
    assert QUESTION.replace("30 ", "30\xa0") in ctx.prompt  # the run that wakes for it is asked the question
    tools = RoleTools(app, role, make_transport(app.config, app.deliverer, "direct"))
    assert "Hello,\n\n" in tools.call("read_thread", {"message_id": question})
    for words, found in (("refresh tokens expire", True), ("Bob", True), ("Bob Example", True), ("style", False)):
        r = project.run("search", words, "--as", "spec-reviewer")
        assert r.returncode == 0 and (question in r.stdout) is found, (words, r.stdout, r.stderr)


def test_attachments_are_listed_and_a_text_one_read_where_the_body_is_shown(
    project: Project, delivered: tuple[str, str]
) -> None:
    _, files = delivered
    r = project.run("read", files, "--as", "spec-reviewer", "--peek")
    assert r.returncode == 0, r.stderr
    assert "Logs attached." in r.stdout and "Attachments (2):" in r.stdout
    assert (
        "[1] server.log (text/plain, 29 bytes)" in r.stdout and "[2] graph.png (image/png, 1.0 KB, binary)" in r.stdout
    )
    assert "--part N" in r.stdout and "ERROR token" not in r.stdout and "PNG" not in r.stdout.replace("png", "")
    r = project.run("read", files, "--as", "spec-reviewer", "--part", "1", "--json", "--peek")
    assert json.loads(r.stdout)[0]["text"] == "ERROR token expired at 12:00\n"
    for args, code, says in (
        (["--part", "2"], 4, "is binary: it is listed, not shown"),
        (["--part", "3"], 4, "no attachment 3 (its attachments: 1 to 2)"),
        (["--part", "0"], 2, "0 is not in the range x>=1"),
        (["--part", "1", "--unread"], 2, "give exactly one MESSAGE-ID"),
    ):
        r = project.run("read", files, "--as", "spec-reviewer", "--peek", *args)
        assert r.returncode == code and says in r.stderr, (args, r.returncode, r.stderr)
    app = project.app
    role = app.roster.roles["spec-reviewer"]
    with app.index() as index:
        index.refresh()
        ctx = build(app, role, index, select(index, app.roster.mailboxes_of("spec-reviewer")))
    assert (
        "[1] server.log (text/plain, 29 bytes)" in ctx.prompt
        and "read_thread(message_id=ITS MESSAGE-ID, part=N)" in ctx.prompt
    )
    tools = RoleTools(app, role, make_transport(app.config, app.deliverer, "direct"))
    assert "[2] graph.png" in tools.call("read_thread", {"message_id": files})
    assert tools.call("read_thread", {"message_id": files, "part": 1}).endswith("ERROR token expired at 12:00\n")
    for part, says in ((2, "is binary"), (9, "no attachment 9"), ("1", "expected the number of an attachment")):
        with pytest.raises(ToolError, match=says):
            tools.call("read_thread", {"message_id": files, "part": part})
    with pytest.raises(ToolError, match="no thread"):
        tools.call("read_thread", {"message_id": "<nobody@x>", "part": 1})


@pytest.mark.parametrize("charset", ["unicode_escape", "idna"])  # the two the hostile review found (others: test_body)
def test_a_hostile_charset_never_locks_the_index_or_stops_a_command(project: Project, charset: str) -> None:
    """The reproduction: `charset=unicode_escape` with `\\ud800` in the body (or `idna`) made the
    index's full-text write raise inside its transaction: every later command said `database is
    locked` and `workflow reindex` crashed on the same file."""
    raw = (
        "From: spec-writer@workflow.local\r\nTo: spec-reviewer@workflow.local\r\nSubject: odd\r\n"
        f"X-Event-Type: question\r\nX-Artifacts: specs/*/user-auth.md\r\nContent-Type: text/plain; charset={charset}\r\n"
        "\r\nhello \\ud800 \xff\xfe\r\n"
    ).encode("latin-1")
    with BackgroundServer(project.app.config, project.app.deliverer) as port, client(port) as s:
        s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], raw)
        s.sendmail(
            "spec-writer@workflow.local",
            ["spec-reviewer@workflow.local"],
            composed("<after@x>", "<p>after</p>").as_bytes(policy=SMTP),
        )
    for args in (
        ["search", "hello", "--as", "spec-reviewer"],
        ["inbox", "spec-reviewer"],
        ["reindex"],
        ["search", "after", "--as", "spec-reviewer"],
        ["status"],
    ):
        r = project.run(*args)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr and "locked" not in r.stderr, (args, r.stderr)
    assert "after" in project.run("search", "after", "--as", "spec-reviewer").stdout
