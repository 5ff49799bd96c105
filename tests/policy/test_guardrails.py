"""Guardrails: named, switchable rules checked at delivery with refusals a model can act on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from helpers.project import Project
from workflow.core.errors import GuardrailError


def test_reviewer_decisions(project: Project) -> None:
    with pytest.raises(GuardrailError, match="reviewer-decisions: an approval may come only from a reviewer role"):
        project.send("spec-writer", "approval", "specs/todo/login.md", "spec-reviewer")
    with pytest.raises(GuardrailError, match="reviewer-decisions"):
        project.send("implementer", "rejection", "specs/todo/login.md", "spec-writer", REASON="no")
    assert project.send("spec-reviewer", "approval", "specs/todo/login.md", "spec-writer")
    assert project.send("spec-reviewer-panel", "rejection", "specs/todo/login.md", "spec-writer", REASON="r")
    assert project.send("spec-reviewer-panel.claude", "approval", "specs/todo/login.md", "spec-writer")
    assert project.send("user", "approval", "specs/todo/login.md", "spec-writer")  # humans may decide
    assert project.new_files("spec-reviewer") == []


def test_reply_visible(project: Project) -> None:
    private = project.send("spec-writer", "question", "specs/*/user-auth.md", "coordinator", QUESTION="q")
    with pytest.raises(
        GuardrailError, match=f"reply-visible: In-Reply-To {private} names a message implementer never received or sent"
    ):
        project.send("implementer", "answer", "specs/*/user-auth.md", "spec-writer", private, CONTEXT="a")
    assert project.send("coordinator", "answer", "specs/*/user-auth.md", "spec-writer", private, CONTEXT="a")
    assert project.send("spec-writer", "status-update", "specs/*/user-auth.md", "coordinator", private)  # its own
    assert project.send("implementer", "answer", "specs/*/user-auth.md", "spec-writer", "<never-seen@x>", CONTEXT="a")


def test_artifacts_exist_when_switched_on(project_factory: Callable[..., Project]) -> None:
    p = project_factory("[guardrails]\nartifacts_exist = true\n")
    assert p.send("spec-writer", "review-request", "specs/*/user-auth.md", "spec-reviewer")
    with pytest.raises(GuardrailError, match="artifacts-exist: X-Artifacts specs/proposed/ghost.md match no file"):
        p.send("spec-writer", "review-request", "specs/proposed/ghost.md", "spec-reviewer")


def test_rules_switch_off(project_factory: Callable[..., Project]) -> None:
    p = project_factory("[guardrails]\nreviewer_decisions = false\nreply_visible = false\n")
    assert p.send("spec-writer", "approval", "specs/todo/login.md", "spec-reviewer")
    private = p.send("spec-writer", "question", "specs/*/user-auth.md", "coordinator", QUESTION="q")
    assert p.send("implementer", "answer", "specs/*/user-auth.md", "spec-writer", private, CONTEXT="a")


def test_unknown_guardrail_key_is_a_config_error(project_factory: Callable[..., Project]) -> None:
    from workflow.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"\[guardrails\] vibes: unknown key"):
        project_factory("[guardrails]\nvibes = true\n")


def test_every_switch_has_one_rule_object_and_every_rule_a_switch() -> None:
    from workflow.core.config import GUARDRAILS
    from workflow.policy.guardrails import ALWAYS, RULES

    assert [r.name for r in RULES] == [s.name for s in GUARDRAILS]
    assert len({r.name for r in RULES} | {f.name for f in ALWAYS}) == len(RULES) + len(ALWAYS)


def test_workflow_guardrails_lists_every_rule_as_configured(project_factory: Callable[..., Project]) -> None:
    import json

    p = project_factory("[guardrails]\nstate-matches = false\nartifacts_exist = true\n")
    r = p.run("guardrails")
    assert r.returncode == 0, r.stderr
    for name in (
        "reviewer-decisions",
        "reply-visible",
        "artifacts-exist",
        "state-matches",
        "sealed-review",
        "internal-members-only",
        "internal-thread-stays-inside",
        "sender-matches-envelope",
    ):
        assert name in r.stdout, name
    data = json.loads(p.run("guardrails", "--json").stdout)
    on = {g["name"]: g["on"] for g in data["guardrails"]}
    assert on == {
        "reviewer-decisions": True,
        "reply-visible": True,
        "artifacts-exist": True,
        "state-matches": False,
        "sealed-review": True,
    }
    assert {a["name"] for a in data["always"]} >= {"internal-no-mixing", "sender-matches-envelope"}
