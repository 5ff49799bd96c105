"""doctor names what the containment of runs cannot guarantee, when the project runs agent CLIs, and
the users file `workflow smtpd` would refuse to start on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.project import Project, free_port, make_project, with_smtp
from workflow.agents.contain import choose


def test_containment_is_reported_only_when_incomplete_and_used(project_factory: Callable[..., Project]) -> None:
    assert not choose("none").complete and "containment switched off" in choose("none").why
    p = project_factory('[agentd]\nbackend = "command"\n[backends.command]\ncontain = "none"\n')
    r = p.run("doctor")
    assert "containment: containment switched off" in r.stdout, r.stdout
    q = project_factory('[backends.command]\ncontain = "none"\n')  # nothing runs the command backend
    assert "containment:" not in q.run("doctor").stdout


def test_a_users_file_smtpd_refuses_is_a_doctor_problem_in_smtpds_words(tmp_path: Path) -> None:
    p = with_smtp(make_project(tmp_path / "p"), 'auth_users_file = "missing-users"\n')  # relative: the project's
    smtpd = p.run("smtpd", "--port", str(free_port()), "--workers", "1")
    assert smtpd.returncode != 0
    why = f"{p.dir / 'missing-users'}: cannot read the AUTH users file: No such file or directory"
    assert why in smtpd.stderr, smtpd.stderr
    assert f"auth: [smtp] auth_users_file: {why}" in p.run("doctor").stdout
