"""Hosts: ``[hosts.NAME]`` in the one workflow.toml every host shares, where each role lives, and
which host this machine is — said by the owner's state directory, never by the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.agentd import Daemon
from helpers.agentd import project as agentd_project
from helpers.hosts import HOSTS, on_host
from helpers.project import Project, make_project
from workflow.app import App
from workflow.bridges.sections import SECTIONS
from workflow.core.config import load_config
from workflow.core.errors import ConfigError, RosterError


def reload(p: Project) -> App:
    return App(load_config(p.dir / "workflow.toml", env={}, plugins=SECTIONS))


def test_each_role_lives_on_its_host_or_the_first_and_each_member_on_its_own(tmp_path: Path) -> None:
    p = make_project(tmp_path / "p", HOSTS)
    on_host(p, "implementer", "build")
    toml = (p.dir / "workflow.toml").read_text()
    toml = toml.replace(
        '[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", "gemini"]',
        '[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", {name = "gemini", host = "build"}]',
    )
    (p.dir / "workflow.toml").write_text(toml)
    ros = reload(p).roster
    assert ros.host_of("implementer") == "build" and ros.host_of("spec-writer") == "hub"
    assert ros.host_of("spec-reviewer-panel.gemini") == "build" and ros.host_of("spec-reviewer-panel.claude") == "hub"
    d = ros.to_dict()
    assert {r["name"]: r["host"] for r in d["roles"]}["implementer"] == "build"  # type: ignore[index]
    out = p.run("roster")
    assert out.returncode == 0, out.stderr
    assert "Hosts (2; this is not chosen yet: `workflow host NAME`):" in out.stdout
    assert "implementer" in out.stdout and "on build" in out.stdout and "gemini (on build)" in out.stdout


def test_a_host_nobody_lists_is_refused_where_it_is_named(tmp_path: Path) -> None:
    p = make_project(tmp_path / "p", HOSTS)
    on_host(p, "implementer", "biuld")
    with pytest.raises(
        RosterError, match=r"implementer\.md: front matter key host: 'biuld' names no host; expected one of"
    ):
        reload(p).roster.roles["implementer"]
    (p.dir / "workflow.toml").write_text(
        (p.dir / "workflow.toml").read_text() + '\n[hosts.spare]\naddress = "127.0.0.2"\n'
    )
    with pytest.raises(ConfigError, match=r"\[hosts.spare\] address: 127.0.0.2 is host hub's already"):
        reload(p)
    q = make_project(tmp_path / "q", "")
    on_host(q, "implementer", "build")
    with pytest.raises(RosterError, match=r"expected a \[hosts.NAME\] table, and there is none"):
        reload(q).roster.roles["implementer"]


def test_workflow_host_names_this_machine_from_the_state_dir_and_its_listeners_bind_its_address(
    tmp_path: Path,
) -> None:
    p = make_project(tmp_path / "p", HOSTS)
    r = p.run("host")
    assert r.returncode == 0 and "this is no host yet" in r.stdout and "build" in r.stdout, r.stdout
    r = p.run("host", "biuld")
    assert r.returncode != 0 and "host 'biuld', which" in r.stderr and "did you mean build?" in r.stderr, r.stderr
    r = p.run("host", "build")
    assert r.returncode == 0 and "this machine is host build" in r.stdout, r.stderr
    state = p.mail / ".workflow" / "host"
    assert state.read_text() == "build\n" and state.stat().st_mode & 0o077 == 0
    cfg = reload(p).config
    assert cfg.this_host == "build" and cfg.smtp.host == "127.0.0.3" and cfg.web.host == "127.0.0.3"
    assert "this is build" in p.run("host").stdout
    state.write_text("gone\n")  # a host since removed from the file: every command says so
    r = p.run("roster")
    assert r.returncode != 0 and "this machine is host 'gone', which" in r.stderr and "workflow host NAME" in r.stderr
    q = make_project(tmp_path / "q", "")
    r = q.run("host", "build")
    assert r.returncode != 0 and "it has no [hosts.NAME] table" in r.stderr, r.stderr
    assert "one host" in q.run("host").stdout


def test_servers_refuse_to_start_until_this_machine_says_which_host_it_is(tmp_path: Path) -> None:
    p = make_project(tmp_path / "p", HOSTS)
    for argv in (["smtpd"], ["agentd", "run"]):
        r = p.run(*argv)
        assert r.returncode != 0 and "this machine has not said which it is: run `workflow host NAME`" in r.stderr, (
            argv,
            r.stderr,
        )


def test_each_hosts_agentd_runs_only_the_roles_that_live_on_it(tmp_path: Path) -> None:
    p = agentd_project(tmp_path, ["spec-writer", "spec-reviewer", "implementer"], extra=HOSTS)
    on_host(p, "implementer", "build")
    on_host(p, "spec-writer", "build")
    for host, roles in (("build", 2), ("hub", 1)):
        assert p.run("host", host).returncode == 0
        agentd = Daemon(p)
        try:
            assert agentd.boots()[-1]["roles"] == roles, agentd.boots()
        finally:
            agentd.stop()
