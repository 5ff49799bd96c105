"""Fail early and say the fix (issue 48, problem 6): a credential that does not reach the agents
is refused before the first run, with doctor's line; a CLI's own "Not logged in" becomes that line."""

from __future__ import annotations

import time
from pathlib import Path

from helpers.agent_clis import cli_bin, fresh_project, needs_claude
from helpers.sandboxing import needs_bwrap


def doctors_line(f: object) -> str:
    r = f.run("doctor")  # type: ignore[attr-defined]
    line = next(x for x in r.stdout.splitlines() if x.startswith("agent-cli: claude-code:"))
    assert "no credential reaches its agents" in line, r.stdout
    return line


@needs_claude
def test_up_and_agentd_refuse_to_start_without_a_credential_with_doctors_line(tmp_path: Path) -> None:
    """Problem 6: `workflow up` started without ANTHROPIC_API_KEY, and every run then failed."""
    f = fresh_project(tmp_path)  # default `workflow init`, a fresh HOME, no credential
    line = doctors_line(f)
    for argv in (("up",), ("up", "--web"), ("agentd", "run")):
        start = time.monotonic()
        r = f.run(*argv)
        took = time.monotonic() - start
        assert r.returncode == 3 and line in r.stderr, (argv, r.stdout, r.stderr)
        assert took < 5, f"{argv} took {took:.1f} s to refuse"
        assert "listening" not in r.stderr + r.stdout  # nothing was started


@needs_claude
def test_run_role_refuses_before_the_run_and_leaves_the_mail_unread(tmp_path: Path) -> None:
    f = fresh_project(tmp_path)
    f.notify("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = f.run("run-role", "--with-email", "spec-reviewer")
    assert r.returncode == 3 and doctors_line(f) in r.stderr, r.stdout + r.stderr
    assert f.unread("spec-reviewer") == 1


@needs_bwrap
@needs_claude
def test_the_clis_own_not_logged_in_and_its_json_become_our_one_line(tmp_path: Path) -> None:
    """A credential the check saw that the CLI still does not take (here a wrapper drops it on the
    way): the real Claude Code says "Not logged in · Please run /login" in 1.5 KB of JSON."""
    f = fresh_project(tmp_path)
    wrapper = tmp_path / "claude-without-key"
    wrapper.write_text(f'#!/bin/sh\nunset ANTHROPIC_API_KEY\nexec {cli_bin() / "claude"} "$@"\n')
    wrapper.chmod(0o755)
    toml = f.dir / "workflow.toml"
    toml.write_text(
        toml.read_text().replace("[backends.claude-code]", f'[backends.claude-code]\nprogram = "{wrapper}"')
        + '\n[runs]\nsandbox = "none"\n'
    )
    f.run("trust")
    f.notify("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = f.run("run-role", "--with-email", "spec-reviewer", ANTHROPIC_API_KEY="sk-x")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and f.unread("spec-reviewer") == 1, out
    assert doctors_line(f).split("agent-cli: ", 1)[1] in out, out
    assert "/login" not in out and '"session_id"' not in out, out
