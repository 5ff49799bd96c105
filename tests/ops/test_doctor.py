"""doctor names what the containment of runs cannot guarantee, when the project runs agent CLIs, the
users file `workflow smtpd` would refuse to start on, an event type without a template, and tells a client's flag changes from index drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from helpers.git import git_project
from helpers.project import Project, free_port, make_project, with_smtp
from workflow.agents.contain import choose
from workflow.core.events import NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_containment_is_reported_only_when_incomplete_and_used(project_factory: Callable[..., Project]) -> None:
    assert not choose("none").complete and "containment switched off" in choose("none").why
    p = project_factory('[agentd]\nbackend = "command"\n[backends.command]\ncontain = "none"\n')
    r = p.run("doctor")
    assert "containment: containment switched off" in r.stdout, r.stdout
    q = project_factory('[backends.command]\ncontain = "none"\n')  # nothing runs the command backend
    assert "containment:" not in q.run("doctor").stdout


def test_flags_a_mail_client_changed_are_not_index_drift(tmp_path: Path) -> None:
    """The reproduction: a client renamed new/X to cur/X:2,S and cur/Y:2, to cur/Y:2,S; doctor
    said index-drift (exit 1) until something rescanned. The same message re-flagged is not drift."""
    p = git_project(tmp_path / "proj")
    for _ in range(2):
        p.send("spec-writer", "question", "specs/proposed/user-auth.md", "spec-reviewer", QUESTION="Why?")
    first, second = p.new_files("spec-reviewer")
    read = second.parent.parent / "cur" / f"{second.name}:2,"
    second.rename(read)
    with p.app.index() as index:  # the index knows cur/Y:2, (a rescan saw it)
        index.refresh()
    first.rename(first.parent.parent / "cur" / f"{first.name}:2,S")  # what the client does next
    read.rename(read.with_name(read.name + "S"))
    r = p.run("doctor")
    assert "index-drift" not in r.stdout, r.stdout
    with p.app.index() as index:  # and the index has the flags the client set
        assert [row.seen for row in index.query(["spec-reviewer"])] == [True, True]


def test_a_users_file_smtpd_refuses_is_a_doctor_problem_in_smtpds_words(tmp_path: Path) -> None:
    p = with_smtp(make_project(tmp_path / "p"), 'auth_users_file = "missing-users"\n')  # relative: the project's
    smtpd = p.run("smtpd", "--port", str(free_port()), "--workers", "1")
    assert smtpd.returncode != 0
    why = f"{p.dir / 'missing-users'}: cannot read the AUTH users file: No such file or directory"
    assert why in smtpd.stderr, smtpd.stderr
    assert f"auth: [smtp] auth_users_file: {why}" in p.run("doctor").stdout


def test_a_configured_event_type_without_a_template_is_reported_until_one_is_written(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")  # made by `workflow init`
    toml = p.dir / "workflow.toml"
    toml.write_text(
        toml.read_text().replace(
            'backend = "scripted"\n', f'backend = "scripted"\nevent_types = {json.dumps([*NAMES, "site-visit"])}\n'
        )
    )
    why = f"templates: event type site-visit ([workflow] event_types) has no template: write {p.dir / 'email-templates' / 'site-visit.txt'}"
    assert why in p.run("doctor").stdout
    listed = json.loads(p.run("events", "--json").stdout)["events"]
    assert [(e["name"], e["configured"], e["template"]) for e in listed[-2:]] == [
        (NAMES[-1], True, str(ROOT / "email-templates" / f"{NAMES[-1]}.txt")),
        ("site-visit", True, ""),
    ]
    (p.dir / "email-templates").mkdir(exist_ok=True)
    (p.dir / "email-templates" / "site-visit.txt").write_text(
        "Subject: [SITE VISIT] {{ ARTIFACT_NAME }}\n\n{{ CONTEXT }}\n"
    )
    assert "templates:" not in p.run("doctor").stdout
