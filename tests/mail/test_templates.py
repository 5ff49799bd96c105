"""Templates: all eight render, missing variables are named, projects override, values stay data."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow.core.errors import TemplateError
from workflow.core.resources import builtin_dir
from workflow.mail.templates import STANDARD_VARS, parse_vars, render

BASE = {
    "FROM_ROLE": "spec-writer",
    "TO_ROLE": "spec-reviewer",
    "ARTIFACT_PATH": "specs/proposed/user-auth.md",
    "ARTIFACT_NAME": "user-auth",
    "WORKFLOW_STATE": "proposed",
    "DATE": "Thu, 26 Nov 2026 03:00:00 +0000",
    "MESSAGE_ID": "<1.a.spec-writer@workflow.local>",
}
REQUIRED = {
    "review-request": {},
    "approval": {},
    "status-update": {},
    "rejection": {"REASON": "r"},
    "clarification-request": {"QUESTION": "q"},
    "question": {"QUESTION": "q"},
    "blocker-report": {"BLOCKING_DETAILS": "b"},
    "answer": {"CONTEXT": "c"},
}


@pytest.mark.parametrize("event", sorted(REQUIRED))
def test_every_template_renders(tmp_path: Path, event: str) -> None:
    r = render(event, {**BASE, **REQUIRED[event]}, tmp_path)
    assert "user-auth" in r.subject
    assert "spec-writer" in r.body


@pytest.mark.parametrize(("event", "var"), [(e, v) for e, vs in REQUIRED.items() for v in vs])
def test_missing_required_variable_is_named(tmp_path: Path, event: str, var: str) -> None:
    with pytest.raises(TemplateError, match=f"needs {var}: pass {var}="):
        render(event, BASE, tmp_path)


def test_readme_documents_every_variable_used() -> None:
    import re

    readme = (builtin_dir("email-templates") / "README.md").read_text()
    used: set[str] = set()
    for p in builtin_dir("email-templates").glob("*.txt"):
        for block in re.findall(r"\{[{%](.*?)[}%]\}", p.read_text()):
            used |= set(re.findall(r"\b([A-Z][A-Z_]+)\b", block))
    assert {"QUESTION", "REASON", "BLOCKING_DETAILS", "NEXT_ROLES"} <= used
    for var in used:
        assert f"`{var}`" in readme, var


def test_project_override_wins(tmp_path: Path) -> None:
    (tmp_path / "approval.txt").write_text("Subject: LGTM {{ ARTIFACT_NAME }}\n\nship it\n")
    r = render("approval", BASE, tmp_path)
    assert r.subject == "LGTM user-auth" and r.body == "ship it\n"
    assert render("rejection", {**BASE, "REASON": "x"}, tmp_path).subject.startswith("[REJECTION]")


def test_values_are_data_not_template_source(tmp_path: Path) -> None:
    r = render("question", {**BASE, "QUESTION": "{{ 7*7 }} {% for x in y %}"}, tmp_path)
    assert "{{ 7*7 }} {% for x in y %}" in r.body


def test_broken_template_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "question.txt").write_text("Subject: x\n\n{% if %}\n")
    with pytest.raises(TemplateError, match="question.txt"):
        render("question", BASE, tmp_path)
    (tmp_path / "answer.txt").write_text("no header block")
    with pytest.raises(TemplateError, match="header block"):
        render("answer", BASE, tmp_path)
    (tmp_path / "status-update.txt").write_text("Subject: x\nMessage-ID: <evil@x>\n\nbody\n")
    with pytest.raises(TemplateError, match="Message-ID is set by workflow-notify"):
        render("status-update", BASE, tmp_path)


def test_sandbox_blocks_attribute_escapes(tmp_path: Path) -> None:
    (tmp_path / "question.txt").write_text("Subject: x\n\n{{ ''.__class__.__mro__[1].__subclasses__() }}\n")
    with pytest.raises(TemplateError):
        render("question", BASE, tmp_path)


@pytest.mark.parametrize(
    ("pair", "needle"),
    [
        ("CONTEXT", "not KEY=VALUE"),
        ("context=x", "upper case"),
        ("CONTEXT=a\r\nBcc: x", "carriage return"),
        ("CONTEXT=a\nb", "line feed"),
        ("CONTEXT=a\0b", "NUL"),
        ("FROM_ROLE=x", "set by workflow-notify"),
    ],
)
def test_bad_key_values(pair: str, needle: str) -> None:
    with pytest.raises(TemplateError, match=needle):
        parse_vars([pair])


def test_standard_vars_listed() -> None:
    assert set(STANDARD_VARS) == set(BASE)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{{ range(10**6) }}", "OverflowError"),  # escaped render() before: a crash, not a refusal
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "past 100000 items"),
        ("{{ 'x' * 3000000 }}", "renders 30000.. characters; at most"),
        ("{{ QUESTION|int // 0 }}", "ZeroDivisionError"),
    ],
)
def test_a_hostile_template_is_refused_at_once_never_a_crash_or_a_pinned_worker(
    tmp_path: Path, body: str, needle: str
) -> None:
    (tmp_path / "question.txt").write_text(f"Subject: x\n\n{body}\n")
    with pytest.raises(TemplateError, match=needle):
        render("question", {**BASE, "QUESTION": "1"}, tmp_path)
