"""Messages: build → parse round-trips, validation refusals, and no value ever adds a header."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workflow.core.config import DEFAULT_EVENTS, DEFAULT_STATES
from workflow.core.errors import MessageError
from workflow.mail.body import body_text
from workflow.mail.message import (
    Draft,
    build,
    canonical_body,
    make_message_id,
    parse,
    reply_subject,
    thread_ids,
    validate,
    validate_artifact,
)

MID = "<20261126030000.abcdef012345.spec-writer@workflow.local>"
EXPECTED_NAMES = [
    "Date",
    "From",
    "To",
    "Subject",
    "Message-ID",
    "X-Event-Type",
    "X-Workflow-State",
    "X-Artifacts",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
]
# Any Unicode text except the three characters a header value may never hold (and surrogates).
header_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\0"), max_size=300)


def draft(**kw: object) -> Draft:
    base: dict[str, object] = {
        "sender": "spec-writer@workflow.local",
        "to": ["spec-reviewer@workflow.local"],
        "subject": "hello",
        "body": "body\n",
        "message_id": MID,
        "event": "review-request",
        "state": "proposed",
        "artifacts": ["specs/proposed/user-auth.md"],
    }
    base.update(kw)
    return Draft(**base)  # type: ignore[arg-type]


def check(raw: bytes) -> None:
    validate(parse(raw), event_types=DEFAULT_EVENTS, states=DEFAULT_STATES)


def test_message_id_format() -> None:
    mid = make_message_id("spec-writer", "workflow.local", datetime(2025, 11, 14, 10, 30, tzinfo=UTC))
    assert mid.startswith("<20251114103000.") and mid.endswith(".spec-writer@workflow.local>")
    assert make_message_id("a", "b.c") != make_message_id("a", "b.c")


def test_build_is_crlf_and_parses_with_stdlib() -> None:
    raw = build(draft(in_reply_to=MID.replace("abc", "xyz"), references=[MID.replace("abc", "xyz")]))
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert msg["X-Event-Type"] == "review-request"
    assert msg["Message-ID"] == MID
    assert msg["In-Reply-To"] == MID.replace("abc", "xyz")
    check(raw)


@settings(max_examples=300, deadline=None)
@given(subject=header_text, context=header_text)
def test_header_values_round_trip_and_never_add_a_header(subject: str, context: str) -> None:
    raw = build(draft(subject=subject, extra=[("X-Context", context)]))
    p = parse(raw)
    assert p.subject == subject
    assert p.get("X-Context") == context
    names = [n for n, _ in p.headers]
    assert names == EXPECTED_NAMES[:8] + ["X-Context"] + EXPECTED_NAMES[8:]
    # The stdlib's own parser agrees on the header set: nothing was smuggled in.
    std = email.message_from_bytes(raw, policy=email.policy.compat32)
    assert list(std.keys()) == names
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    check(raw)


@settings(max_examples=200, deadline=None)
@given(body=st.text(st.characters(blacklist_categories=("Cs",)), max_size=3000))
def test_bodies_round_trip(body: str) -> None:
    raw = build(draft(body=body))
    assert body_text(raw) == canonical_body(body)
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))


def test_long_unbreakable_subject_is_encoded_within_998() -> None:
    subject = "x" * 5000
    raw = build(draft(subject=subject))
    assert parse(raw).subject == subject
    assert max(len(line) for line in raw.split(b"\r\n")) <= 998


def test_non_ascii_is_rfc2047_encoded() -> None:
    raw = build(draft(subject="Überprüfung — 認証"))
    assert b"=?utf-8?" in raw
    raw.decode("ascii")
    assert parse(raw).subject == "Überprüfung — 認証"


def test_literal_encoded_word_text_survives() -> None:
    text = "=?UTF-8?Q?x=0ABcc:_y?="
    raw = build(draft(subject=text))
    assert parse(raw).subject == text
    assert [n for n, _ in parse(raw).headers].count("Bcc") == 0


@pytest.mark.parametrize("bad", ["a\r\nBcc: x@y", "a\nBcc: x@y", "a\rb", "a\0b"])
def test_build_refuses_line_breaks_and_nul(bad: str) -> None:
    with pytest.raises(MessageError, match="header Subject"):
        build(draft(subject=bad))


def test_parse_refuses_encoded_word_hiding_a_newline() -> None:
    # CVE-2024-6923's shape: the newline only appears after RFC 2047 decoding.
    raw = build(draft()).replace(b"Subject: hello", b"Subject: =?UTF-8?Q?x=0ABcc:_y?=")
    with pytest.raises(MessageError, match="Subject.*line feed"):
        check(raw)


@pytest.mark.parametrize(
    ("header", "value", "needle"),
    [
        ("X-Event-Type", "party", "unknown event type 'party'"),
        ("X-Workflow-State", "limbo", "unknown state 'limbo'"),
        ("X-Artifacts", "/etc/passwd", "absolute"),
        ("X-Artifacts", "specs/../../etc/passwd", "'..'"),
        ("Message-ID", "no-angle-brackets", "Message-ID"),
    ],
)
def test_validate_refuses_bad_workflow_headers(header: str, value: str, needle: str) -> None:
    raw = build(draft())
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = [ln for ln in head.split(b"\r\n") if not ln.startswith(header.encode() + b":")]
    lines.append(f"{header}: {value}".encode())
    with pytest.raises(MessageError, match=needle):
        check(b"\r\n".join(lines) + b"\r\n\r\n" + body)


def test_validate_refuses_overlong_header_line() -> None:
    raw = build(draft()).replace(b"Subject: hello", b"Subject: " + b"y" * 1200)
    with pytest.raises(MessageError, match="998"):
        check(raw)


@pytest.mark.parametrize(
    "path", ["/abs/x.md", "~/x.md", "../x.md", "specs/../../x", "a b.md", "a,b.md", "C:/x", "a\\b", ""]
)
def test_artifact_paths_refused(path: str) -> None:
    with pytest.raises(MessageError):
        validate_artifact(path)


def test_artifact_globs_allowed() -> None:
    assert validate_artifact("specs/*/auth.md") == "specs/*/auth.md"


def test_reply_subject_and_thread_ids() -> None:
    assert reply_subject("Re: RE: [APPROVAL] x") == "Re: [APPROVAL] x"
    raw = build(draft(in_reply_to="<b@x>", references=["<a@x>", "<b@x>"]))
    assert thread_ids(parse(raw)) == ["<a@x>", "<b@x>"]


def test_parse_tolerates_lf_only_and_folded_headers() -> None:
    raw = b"From: a@workflow.local\nSubject: one\n two\nX-Artifacts: specs/*/a.md,\n specs/*/b.md\n\nbody\n"
    p = parse(raw)
    assert p.subject == "one two"
    assert p.artifacts == ["specs/*/a.md", "specs/*/b.md"]
    assert body_text(raw, p) == "body\n"


@pytest.mark.parametrize(
    "name", ["From\x1c", "\x1fFrom", "From\x85", "From\xa0", "From\u3000", "Fro\u212a", "From\x0b"]
)
def test_a_field_name_only_spaces_and_tabs_surround_is_no_other_header(name: str) -> None:
    """Only spaces and tabs go from around a field name (RFC 5322's obsolete syntax); any other
    character keeps it from being read as From — and delivery refuses the name."""
    raw = f"{name}: spec-reviewer@workflow.local\r\nSubject: s\r\n\r\nbody\r\n".encode()
    p = parse(raw)
    assert p.get("From") is None and p.sender == "" and p.counts == {"subject": 1}, p.headers
    with pytest.raises(MessageError, match="not a valid RFC 5322 field name"):
        check(raw)
    assert parse(b"From \t: a@workflow.local\r\n\r\n").sender == "a@workflow.local"
