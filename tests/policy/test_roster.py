"""Roster: shipped roles, panel addresses, routes, suggestions, and role-file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.project import Project
from workflow.core.config import DEFAULT_EVENTS
from workflow.core.errors import RosterError
from workflow.policy.roles import parse_role

SEED_ROLES = (
    [
        f"{k}-{side}"
        for k in ("vision", "scope", "roadmap", "spec", "skeleton", "test", "implementation")
        for side in ("writer", "reviewer")
    ]
    + ["implementer", "coordinator", "platform-lead"]
    + [f"{k}-writing-helper" for k in ("vision", "scope", "roadmap", "spec")]
)


def test_shipped_roles_cover_the_seed(project: Project) -> None:
    roles = project.app.roster.roles
    for name in SEED_ROLES:
        assert name in roles, name
        assert roles[name].prompt.strip()
    assert all(roles[f"{k}-writing-helper"].mode == "sync" for k in ("vision", "scope", "roadmap", "spec"))
    assert roles["spec-reviewer"].mode == "async" and "review-request" in roles["spec-reviewer"].triggers


@pytest.mark.parametrize(
    ("address", "kind", "boxes"),
    [
        ("spec-reviewer", "role", ["spec-reviewer"]),
        ("Spec-Reviewer@workflow.local", "role", ["spec-reviewer"]),
        (
            "spec-reviewer-panel",
            "panel",
            ["spec-reviewer-panel.claude", "spec-reviewer-panel.gpt-5", "spec-reviewer-panel.gemini"],
        ),
        ("spec-reviewer-panel.gpt-5", "member", ["spec-reviewer-panel.gpt-5"]),
        (
            "spec-reviewer-panel-internal",
            "internal",
            ["spec-reviewer-panel.claude", "spec-reviewer-panel.gpt-5", "spec-reviewer-panel.gemini"],
        ),
        (
            "spec-writer-panel-internal",
            "internal",
            ["spec-writer-panel.claude", "spec-writer-panel.gpt-5", "spec-writer-panel.gemini"],
        ),
        (
            "spec-discussion",
            "discussion",
            [f"spec-{s}-panel.{m}" for s in ("writer", "reviewer") for m in ("claude", "gpt-5", "gemini")],
        ),
        ("vision-discussion", "discussion", ["vision-writer", "vision-reviewer"]),
        ("someone@gmail.com", "external", []),
    ],
)
def test_routes(project: Project, address: str, kind: str, boxes: list[str]) -> None:
    r = project.app.roster.route(address)
    assert r.kind == kind
    assert list(r.mailboxes) == boxes


def test_unknown_address_suggests_nearest(project: Project) -> None:
    with pytest.raises(
        RosterError, match="unknown address spec-reveiwer@workflow.local; did you mean spec-reviewer@workflow.local"
    ):
        project.app.roster.route("spec-reveiwer")


def test_sync_roles_take_and_send_no_mail(project: Project) -> None:
    with pytest.raises(RosterError, match="sync helper role"):
        project.app.roster.route("spec-writing-helper")
    with pytest.raises(RosterError, match="sync helper role"):
        project.app.roster.sender("spec-writing-helper@workflow.local")


def test_internal_senders(project: Project) -> None:
    ros = project.app.roster
    r = ros.route("spec-reviewer-panel-internal")
    assert ros.may_send("spec-reviewer-panel.claude", r).allowed
    decision = ros.may_send("spec-writer-panel.claude", r)
    assert not decision.allowed and "internal-members-only" in decision.rule


def test_project_role_overrides_builtin(project_factory: object) -> None:
    p = project_factory()  # type: ignore[operator]
    (p.dir / "roles").mkdir()
    (p.dir / "roles" / "spec-reviewer.md").write_text(
        '+++\nmode = "async"\ntriggers = ["question"]\n+++\nCustom prompt.\n'
    )
    (p.dir / "roles" / "security-reviewer.md").write_text('+++\nmode = "async"\n+++\nSecurity.\n')
    from workflow.app import App
    from workflow.core.config import load_config

    roles = App(load_config(p.dir / "workflow.toml", env={})).roster.roles
    assert roles["spec-reviewer"].prompt == "Custom prompt.\n"
    assert roles["spec-reviewer"].triggers == ("question",)
    assert "security-reviewer" in roles and "implementer" in roles


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("no front matter", "front matter starting"),
        ("+++\nmode = 'async'\n", "no closing"),
        ("+++\nmode = 'daemon'\n+++\n", "mode: expected one of async, sync, human"),
        ("+++\ntriggers = ['party']\n+++\n", "unknown event type 'party'"),
        ("+++\nflavour = 'x'\n+++\n", "unknown front matter key 'flavour'"),
        ("+++\nmode = \n+++\n", "invalid TOML"),
    ],
)
def test_bad_role_files_name_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad-role.md"
    with pytest.raises(RosterError) as e:
        parse_role(path, text, DEFAULT_EVENTS)
    assert str(path) in str(e.value) and needle in str(e.value)
