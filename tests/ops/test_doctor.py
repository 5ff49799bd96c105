"""doctor names what the containment of runs cannot guarantee, when the project runs agent CLIs."""

from __future__ import annotations

from collections.abc import Callable

from helpers.project import Project
from workflow.agents.contain import choose


def test_containment_is_reported_only_when_incomplete_and_used(project_factory: Callable[..., Project]) -> None:
    assert not choose("none").complete and "containment switched off" in choose("none").why
    p = project_factory('[agentd]\nbackend = "command"\n[backends.command]\ncontain = "none"\n')
    r = p.run("doctor")
    assert "containment: containment switched off" in r.stdout, r.stdout
    q = project_factory('[backends.command]\ncontain = "none"\n')  # nothing runs the command backend
    assert "containment:" not in q.run("doctor").stdout
