"""A new user's projects: each gets its own mail root, and nothing runs outside a project."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from helpers.git import GIT_ENV
from helpers.project import Home


def _init(base: Path, name: str, env: dict[str, str] | None = None) -> Home:
    d = base / name
    d.mkdir(parents=True)
    p = Home(d, None)  # type: ignore[arg-type]  # no App: the CLI makes the project
    p.home = base / "home"
    p.home.mkdir(exist_ok=True)
    r = p.run("init", env=env)
    assert r.returncode == 0, r.stderr
    (d / "specs" / "proposed" / "user-auth.md").write_text("# User auth\n")
    return p


def test_two_projects_made_side_by_side_never_see_each_others_mail(tmp_path: Path) -> None:
    a = _init(tmp_path, "projA")
    b = _init(tmp_path, "projB")
    home = a.home
    assert 'mail_root = "~/.maildir/workflow"' in (a.dir / "workflow.toml").read_text()
    toml_b = (b.dir / "workflow.toml").read_text()
    assert 'mail_root = "~/.maildir/workflow-projb"' in toml_b
    assert (home / ".maildir" / "workflow" / ".workflow" / "project").read_text().strip() == str(a.dir)
    r = a.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=look", tool="workflow-notify")
    assert r.returncode == 0, r.stderr
    assert list((home / ".maildir" / "workflow" / "spec-reviewer" / "new").iterdir())  # where 002_… looks
    r = b.run("inbox", "spec-reviewer")
    assert r.returncode == 0, r.stderr
    assert "review-request" not in r.stdout and "0 unread" in r.stdout, r.stdout
    r = b.run("doctor")
    assert "user-auth" not in r.stdout + r.stderr or "projA" not in r.stdout + r.stderr
    # Pointed at A's mail root by hand, B refuses in one line naming both.
    r = b.run("--mail-root", str(home / ".maildir" / "workflow"), "inbox", "spec-reviewer")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"belongs to the project in {a.dir}" in r.stderr and str(b.dir) in r.stderr
    r = b.run(
        "review-request",
        "specs/proposed/user-auth.md",
        "spec-reviewer",
        tool="workflow-notify",
        env={"WORKFLOW_MAIL_ROOT": str(home / ".maildir" / "workflow")},
    )
    assert r.returncode != 0 and "belongs to the project in" in r.stderr
    assert len(list((home / ".maildir" / "workflow" / "spec-reviewer" / "new").iterdir())) == 1


def test_outside_a_project_every_command_refuses_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    p = Home(empty, None)  # type: ignore[arg-type]
    p.home = tmp_path / "home"
    for args, tool in (
        (["review-request", "specs/proposed/x.md", "spec-reviewer"], "workflow-notify"),
        (["status"], "workflow"),
        (["inbox", "spec-reviewer"], "workflow"),
    ):
        r = p.run(*args, tool=tool)
        assert r.returncode != 0, (args, r.stdout)
        (line,) = r.stderr.strip().splitlines()
        assert "no workflow.toml" in line and "workflow init" in line and "--config" in line, line
    assert not (p.home / ".maildir").exists()  # nothing was delivered anywhere


def test_init_picks_a_backend_or_says_how_and_run_role_refuses_in_one_line_without_one(tmp_path: Path) -> None:
    none = _init(tmp_path, "plain")
    r = none.run("init")  # the second run says nothing new; the first one's notes are in the file
    toml = (none.dir / "workflow.toml").read_text()
    assert '# backend = "claude-code"' in toml and '\nbackend = "' not in toml
    none.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=look", tool="workflow-notify")
    r = none.run("--with-email", "spec-reviewer", tool=str(Path(sys.executable).parent / "run-role"))
    assert r.returncode != 0, r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert "no backend chosen for spec-reviewer" in line and "[workflow] backend" in line, line
    # agentd runs anyway (it serves people and applies their decisions) and names who waits for a backend
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    agentd = subprocess.Popen(
        [sys.executable, "-m", "workflow", "agentd", "run"],
        cwd=none.dir,
        env={**env, "HOME": str(none.home), **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert agentd.stdout is not None
    guard = threading.Timer(30, agentd.kill)  # never hang here: a silent agentd fails the test
    guard.start()
    said = ""
    for line in agentd.stdout:
        said += line
        if "no-backend" in line:
            break
    agentd.terminate()
    said += agentd.communicate(timeout=30)[0]
    guard.cancel()
    assert "spec-reviewer" in said and "cannot run until a backend is chosen" in said, said
    # With a key: the anthropic backend; with claude on PATH: its profile, claude-code, and the
    # docs/running-roles.md's `run-role --with-email spec-reviewer` runs it as written — a `claude` that only
    # talks (it never finishes the run) fails it, saying why, and the mail waits.
    keyed = tmp_path / "keyed"
    keyed.mkdir()
    k = Home(keyed, None)  # type: ignore[arg-type]
    k.home = none.home
    r = k.run("init", env={"ANTHROPIC_API_KEY": "sk-test"})
    assert r.returncode == 0 and 'backend = "anthropic"' in (keyed / "workflow.toml").read_text(), r.stderr
    assert "ANTHROPIC_API_KEY is set" in r.stdout
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(
        '#!/bin/sh\ncat > /dev/null\necho \'{"session_id": "s1", "result": "Reviewed: the spec is clear."}\'\n'
    )
    claude.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    c = _init(tmp_path, "withclaude", env={"PATH": path})
    toml = (c.dir / "workflow.toml").read_text()
    assert 'backend = "claude-code"' in toml and "[backends.claude-code]" in toml
    c.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=look", tool="workflow-notify")
    r = c.run("--with-email", "spec-reviewer", tool=str(Path(sys.executable).parent / "run-role"), env={"PATH": path})
    assert r.returncode == 3 and "agent-cli: claude-code: no credential reaches its agents" in r.stderr, r.stderr
    key = {"PATH": path, "ANTHROPIC_API_KEY": "sk-test"}  # a credential: the run starts, and fails saying why
    r = c.run("--with-email", "spec-reviewer", tool=str(Path(sys.executable).parent / "run-role"), env=key)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "never called finish" in r.stdout and "left unread" in r.stdout, r.stdout
