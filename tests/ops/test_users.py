"""`workflow users add` and `init`'s team options, in-process against real files, real git and the
users file the servers read: what the by-hand steps did, in one command, and each refusal's fix."""

from __future__ import annotations

import tomllib
from pathlib import Path

from helpers.project import Home
from workflow.delivery.credentials import check_password, load_users


def _project(base: Path, name: str, *init: str) -> Home:
    d = base / name
    d.mkdir(parents=True)
    p = Home(d, None)  # type: ignore[arg-type]  # no App: the CLI makes the project
    p.home = base / "home"
    p.home.mkdir(exist_ok=True)
    r = p.run("init", *init)
    assert r.returncode == 0, r.stderr
    return p


def test_users_add_hashes_appends_makes_the_role_human_and_approves_only_its_change(tmp_path: Path) -> None:
    p = _project(tmp_path, "proj")
    (p.dir / "roles" / "spec-writer.md").write_text('+++\nmode = "async"\n+++\n# mine\n')  # not approved yet
    r = p.run("users", "add", "bob", "--role", "spec-reviewer", "--password-stdin", input="bob-s3cret\n")
    assert r.returncode == 0, r.stderr
    assert "bob-s3cret" not in r.stdout + r.stderr
    users = load_users(str(p.home / ".config/workflow/users"))
    assert users["bob"].roles == ("spec-reviewer",) and check_password("bob-s3cret", users["bob"].secret)
    assert (p.home / ".config/workflow/users").stat().st_mode & 0o777 == 0o600
    role = (p.dir / "roles/spec-reviewer.md").read_text()
    assert role.startswith('+++\nmode = "human"\n') and "# spec-reviewer" in role  # the built-in, mode changed
    toml = tomllib.loads((p.dir / "workflow.toml").read_text())
    assert toml["smtp"]["auth_users_file"] == "~/.config/workflow/users"
    doctor = p.run("doctor")
    assert "roles/spec-writer.md" in doctor.stdout  # a change it did not make stays for the owner to read
    assert "spec-reviewer.md" not in doctor.stdout and "workflow.toml" not in doctor.stdout, doctor.stdout
    roster = p.run("roster").stdout
    assert any("spec-reviewer" in line and "human" in line for line in roster.splitlines()), roster

    again = p.run("users", "add", "bob", "--role", "spec-reviewer", "--password-stdin", input="another-pw\n")
    assert again.returncode != 0 and "login bob is there already" in again.stderr and "remove its line" in again.stderr
    short = p.run("users", "add", "carol", "--role", "user", "--password-stdin", input="short\n")
    assert short.returncode != 0 and "shorter than 8" in short.stderr
    p.run("users", "add", "carol", "--role", "user", "--password-stdin", input="carol-pw-1\n")
    assert sorted(load_users(str(p.home / ".config/workflow/users"))) == ["bob", "carol"]


def test_init_takes_the_team_and_gives_each_project_its_own_cockpit_port(tmp_path: Path) -> None:
    a = _project(tmp_path, "a", "--human", "bob=spec-reviewer", "--backend", "codex")
    b = _project(tmp_path, "b")
    ta, tb = (tomllib.loads((p.dir / "workflow.toml").read_text()) for p in (a, b))
    assert ta["workflow"]["backend"] == "codex"
    assert len({ta["web"]["port"], tb["web"]["port"], ta["smtp"]["port"], tb["smtp"]["port"], 8026}) == 5
    assert 'mode = "human"' in (a.dir / "roles/spec-reviewer.md").read_text()
    assert not (b.dir / "roles/spec-reviewer.md").exists()
    bad = a.run("init", str(tmp_path / "c"), "--human", "bob")
    assert bad.returncode != 0 and "expected LOGIN=ROLE" in bad.stderr
    wrong = a.run("init", str(tmp_path / "d"), "--backend", "claude")
    assert wrong.returncode != 0 and "--backend 'claude'" in wrong.stderr and "claude-code" in wrong.stderr
