"""Body: what a reader is shown of a message — HTML as text, attachments listed — and hostile bodies."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from workflow.core.errors import MessageError
from workflow.mail.body import MAX_PART_TEXT, body_text, part_text, readable
from workflow.mail.htmltext import MAX_HTML, html_text

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def mail(html: str | None = None, plain: str | None = None) -> EmailMessage:
    m = EmailMessage()
    m["From"] = "spec-writer@workflow.local"
    m["Subject"] = "a question"
    if plain is not None:
        m.set_content(plain)
        if html is not None:
            m.add_alternative(html, subtype="html")
    elif html is not None:
        m.set_content(html, subtype="html")
    return m


def test_html_is_read_as_text_with_its_structure_and_without_its_code() -> None:
    html = (
        "<html><head><title>T</title><style>p { color: red }</style></head><body>"
        "<script>alert('SCRIPT-CONTENT')</script><p>Should tokens &amp; sessions expire&nbsp;after 30&#8239;days?</p>"
        "<p>First line<br>second line</p><ul><li>one</li><li>see <a href='https://example.org/spec'>the spec</a></li>"
        "</ul><ol><li>a</li><li>b</li></ol><img src='x.png' alt='a diagram'></body></html>"
    )
    text = body_text(mail(html).as_bytes())
    assert "SCRIPT-CONTENT" not in text and "color" not in text and "<" not in text
    assert "Should tokens & sessions expire\xa0after 30\u202fdays?\n\nFirst line\nsecond line\n" in text
    assert "- one\n- see the spec (https://example.org/spec)\n" in text
    assert "1. a\n2. b" in text and "[image: a diagram]" in text


def test_plain_text_is_preferred_and_an_empty_plain_part_gives_way_to_the_html() -> None:
    assert body_text(mail("<p>HTML version</p>", "plain version\n").as_bytes()) == "plain version\n"
    assert body_text(mail("<p>HTML version</p>", "\n").as_bytes()) == "HTML version\n"
    assert readable(mail("<p>HTML version</p>", "plain\n").as_bytes()).parts == ()  # an alternative is no attachment


def test_attachments_are_listed_and_text_ones_read_by_number() -> None:
    m = mail(html="<p>see attached</p>")
    m.add_attachment("line one\nline two\n", filename="notes.txt")
    m.add_attachment(PNG, maintype="image", subtype="png", filename="chart.png")
    m.add_attachment(b'{"a": 1}', maintype="application", subtype="json", filename="data.json")
    raw = m.as_bytes()
    body = readable(raw)
    assert body.text == "see attached\n"
    assert [(p.number, p.name, p.content_type, p.text) for p in body.parts] == [
        (1, "notes.txt", "text/plain", True),
        (2, "chart.png", "image/png", False),
        (3, "data.json", "application/json", True),
    ]
    assert body.parts[1].size == len(PNG)
    listing = body.listing("--part N")
    assert "[2] chart.png (image/png, 1.0 KB, binary)" in listing and "--part N" in listing
    assert part_text(raw, 1)[1] == "line one\nline two\n" and part_text(raw, 3)[1] == '{"a": 1}'
    for bad, says in (
        (2, "is binary"),
        (4, r"no attachment 4 \(its attachments: 1 to 3\)"),
        (0, "expected the number"),
    ):
        with pytest.raises(MessageError, match=says):
            part_text(raw, bad)
    with pytest.raises(MessageError, match="expected the number"):
        part_text(raw, "1")  # type: ignore[arg-type]


def test_a_huge_html_body_is_cut_and_says_so() -> None:
    markup = "<div><p>word &amp; <b>more</b></p>" * (MAX_HTML // 20) + "<p>THE-END</p>"
    text = html_text(markup)
    assert text.startswith("word & more") and "THE-END" not in text
    assert "more characters of HTML not shown]" in text and len(text) < MAX_HTML
    nested = "<ol>" * 100_000 + "<li>deep</li>"  # every open list kept on a stack: bounded by the input
    assert "deep" in html_text(nested)


def test_a_huge_text_attachment_is_cut() -> None:
    m = mail(plain="body\n")
    m.add_attachment("x" * (MAX_PART_TEXT + 10), filename="big.txt")
    text = part_text(m.as_bytes(), 1)[1]
    assert len(text) < MAX_PART_TEXT + 100 and text.endswith("[… 11 more characters not shown]\n")  # 10 and an LF


@pytest.mark.parametrize("kind", ["multipart/mixed", "message/rfc822"])
def test_deeply_nested_parts_are_refused_by_number_without_a_crash(kind: str) -> None:
    head = (
        f"Content-Type: {kind}; boundary=b\r\n\r\n" if kind.startswith("multipart") else f"Content-Type: {kind}\r\n\r\n"
    )
    if kind.startswith("multipart"):
        raw = b"Subject: deep\r\n" + b"".join(
            f"Content-Type: {kind}; boundary=b{i}\r\n\r\n--b{i}\r\n".encode() for i in range(150)
        )
    else:
        raw = b"Subject: deep\r\n" + (head.encode() * 150) + b"Content-Type: text/plain\r\n\r\nbottom\r\n"
    assert readable(raw).text.startswith("[body not shown: more than")
    with pytest.raises(MessageError, match="cannot be read"):
        part_text(raw, 1)


@pytest.mark.parametrize("charset", ["x-no-such-charset", "base64", "idna", "utf-7", ""])
def test_bad_charsets_are_read_with_replacement_never_a_crash(charset: str) -> None:
    cs = f'; charset="{charset}"' if charset else ""
    for ctype, body in (("text/plain", b"caf\xe9 ok \xff"), ("text/html", b"<p>caf\xe9 ok \xff</p>")):
        raw = f"Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: {ctype}{cs}\r\n\r\n".encode() + body + b"\r\n"
        assert "ok" in body_text(raw)
        multi = (
            (
                f"Subject: x\r\nContent-Type: multipart/mixed; boundary=z\r\n\r\n--z\r\nContent-Type: {ctype}{cs}\r\n"
                "Content-Transfer-Encoding: base64\r\n\r\n!!not base64!!\r\n--z\r\nContent-Type: text/plain"
                f'{cs}\r\nContent-Disposition: attachment; filename="a.txt"\r\n\r\n'
            ).encode()
            + body
            + b"\r\n--z--\r\n"
        )
        got = readable(multi)
        assert [p.name for p in got.parts] == ["a.txt"] and "ok" in part_text(multi, 1)[1]
