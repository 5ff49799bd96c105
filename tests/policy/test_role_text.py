"""Role prompts agree with role files: the triggers and moves a role's text states are its front matter's."""

from __future__ import annotations

from pathlib import Path

from helpers.project import Project
from workflow.core.config import load_config
from workflow.core.resources import builtin_dir
from workflow.policy.roles import disagreements, load_roles, parse_role

EVENTS = ("review-request", "approval", "rejection", "clarification-request", "question", "answer")


def test_every_built_in_role_says_what_its_front_matter_gives_it(project: Project) -> None:
    roles = load_roles(project.app.config)
    assert {r.path.parent for r in roles.values()} == {builtin_dir("roles")}
    assert [line for r in roles.values() for line in disagreements(r)] == []
    stated = [r.name for r in roles.values() if r.mode == "async" and "Moves you own:" in r.prompt]
    assert len(stated) >= 10  # the check reads the roles' text: it would notice a rewording that hid it


def role(tmp_path: Path, front: str, body: str) -> str:
    path = tmp_path / "writer.md"
    path.write_text(f'+++\nmode = "async"\n{front}+++\n\n# writer\n{body}')
    return "\n".join(disagreements(parse_role(path, path.read_text(), EVENTS)))


def test_a_role_whose_text_claims_other_moves_or_triggers_is_named(tmp_path: Path) -> None:
    front = 'triggers = ["approval", "question"]\nmoves = ["todo -> doing", "* -> proposed"]\n'
    assert (
        role(
            tmp_path,
            front,
            "- Mail that wakes you: approval, question.\n- Moves you own: todo → doing, * → proposed. Make them.\n",
        )
        == ""
    )
    said = role(tmp_path, front, "- Mail that wakes you: question.\n- Moves you own: * → proposed. Make them.\n")
    assert "the mail that wakes it is question; its front matter triggers are approval, question" in said
    assert "its moves are * → proposed; its front matter moves are todo → doing, * → proposed" in said


def test_doctor_names_a_project_role_whose_text_disagrees(project: Project) -> None:
    (project.dir / "roles").mkdir(exist_ok=True)
    text = (builtin_dir("roles") / "spec-writer.md").read_text()
    (project.dir / "roles" / "spec-writer.md").write_text(
        text.replace('moves = ["* -> proposed"]', 'moves = ["* -> proposed", "proposed -> todo"]')
    )
    r = project.run("doctor")
    assert r.returncode == 1
    assert "role-text" in r.stdout and "spec-writer.md: its text says its moves are * → proposed" in r.stdout
    assert load_config(project.dir / "workflow.toml", env={})  # the project still loads: a warning, not a refusal
