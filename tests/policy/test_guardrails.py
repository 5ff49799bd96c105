"""Guardrails: named, switchable rules checked at delivery with refusals a model can act on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.project import Project
from workflow.core.errors import GuardrailError

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "guardrails-and-events.md").read_text()


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
    with pytest.raises(
        ConfigError, match=r"workflow.toml: \[guardrails\] state-matchs: unknown key \(did you mean state-matches\?\)"
    ):
        project_factory("[guardrails]\nstate_matchs = false\n")


def test_every_rule_has_one_name_a_default_and_says_what_it_refuses() -> None:
    from workflow.policy.guardrails import ALWAYS, RULES

    assert all(isinstance(r.default, bool) and r.refuses and r.name in PAGE for r in RULES)
    assert len({r.name for r in RULES} | {f.name for f in ALWAYS}) == len(RULES) + len(ALWAYS)


def test_workflow_guardrails_lists_every_rule_as_configured(project_factory: Callable[..., Project]) -> None:
    import json

    from workflow.policy.guardrails import RULES

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
    assert on == {r.name: r.default for r in RULES} | {"artifacts-exist": True, "state-matches": False}
    assert on["reviewer-decisions"] and on["reply-visible"] and on["sealed-review"]  # on by default
    assert {a["name"] for a in data["always"]} >= {"internal-no-mixing", "sender-matches-envelope"}
