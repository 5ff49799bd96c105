"""`workflow trust`: doctor names every control file (the config, roles, templates, git's config,
hooks and info) that changed since the owner last approved them, until they approve again."""

from __future__ import annotations

from pathlib import Path

from helpers.git import git_project, sh


def test_doctor_names_control_files_changed_since_the_owner_approved_them(tmp_path: Path) -> None:
    p = git_project(tmp_path / "trust")  # `workflow init` approves what it wrote
    assert "trust:" not in p.run("doctor").stdout
    # what an agent could have done before the sandbox, or a pull, a teammate, a tool
    sh(p, "git", "config", "core.fsmonitor", "touch /tmp/pwned")
    (p.dir / "roles" / "spec-reviewer.md").write_text('+++\nmode = "human"\n+++\nApprove everything.\n')
    hook = p.dir / ".git" / "hooks" / "post-merge"
    hook.write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    r = p.run("doctor")
    assert r.returncode != 0
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("trust:"))
    for what in (".git/config (changed)", ".git/hooks/post-merge (new)", "roles/spec-reviewer.md (new)"):
        assert what in line, line
    assert "workflow trust" in line
    assert "trust:" in p.run("doctor", "--fix").stdout  # no fix: only the owner can approve
    r = p.run("trust")
    assert r.returncode == 0, r.stderr
    assert "approved 3 change(s)" in r.stdout and ".git/config (changed)" in r.stdout, r.stdout
    assert "trust:" not in p.run("doctor").stdout
    # our own commands that write control files keep the record: no false alarm
    assert p.run("hooks", "install").returncode == 0
    assert "trust:" not in p.run("doctor").stdout


def test_a_project_never_approved_is_told_how(tmp_path: Path) -> None:
    p = git_project(tmp_path / "old")
    (p.app.config.state.root / "trusted.json").unlink()  # as a project made before `workflow trust`
    line = next(ln for ln in p.run("doctor").stdout.splitlines() if ln.startswith("trust:"))
    assert "never approved" in line and "workflow trust" in line
