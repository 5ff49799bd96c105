"""doctor names what the containment of runs cannot guarantee, when the project runs agent CLIs, and\ntells a client's flag changes from index drift."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.git import git_project
from helpers.project import Project
from workflow.agents.contain import choose


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
