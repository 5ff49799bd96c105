"""The real agent CLIs, from npm, in the real sandbox, driven by a stand-in model API at the wire:
whatever the CLI does, a run that did not do its work never passes for one that did."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.agent_clis import cli_bin, fresh_project, needs_claude, needs_codex, needs_gemini
from helpers.fake_anthropic import FakeAnthropic, text, tool_results, tool_use
from helpers.git import git_project, mail
from helpers.runs import run_command_role, unread
from helpers.sandboxing import needs_bwrap


@needs_bwrap
@needs_claude
def test_claude_code_denying_its_own_tool_fails_the_run_and_the_mail_stays_unread(tmp_path: Path) -> None:
    """Issue 35: in -p mode Claude Code denies every tool not allowed, reports it in
    ``permission_denials`` and exits 0 — the run must fail, not pass for done."""
    p = git_project(tmp_path / "claude")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic(cli=True) as api:
        api.add(
            tool_use("Bash", {"command": "workflow move user-auth todo --as spec-reviewer", "description": "approve"})
        )
        api.add(text("Approved and moved to todo."))
        env = {"PATH": f"{cli_bin()}:{os.environ['PATH']}", "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-x"}
        r = run_command_role(p, "spec-reviewer", env=env)
    assert api.requests, "the real CLI never reached the stand-in model"
    assert any("requires approval" in t or "permission" in t.lower() for t in tool_results(api.requests))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "denied" in r.stdout and "Bash" in r.stdout, r.stdout
    assert unread(p, "spec-reviewer") == 1  # the review-request waits for a run that does the work
    assert (p.dir / "specs" / "proposed" / "user-auth.md").exists()
    assert mail(p, "approval") == []


@needs_bwrap
@needs_codex
@needs_gemini
def test_npm_installed_codex_and_gemini_start_inside_the_sandbox(tmp_path: Path) -> None:
    """Issue 35: only argv[0]'s own file was bound — Codex: "Missing optional dependency
    @openai/codex-linux-x64"; Gemini: ERR_MODULE_NOT_FOUND for its bundle's chunks."""
    p = git_project(tmp_path / "npm")
    env = {"PATH": f"{cli_bin()}:{os.environ['PATH']}"}
    for command, says in (("codex", "codex-cli 0.171.0"), ("gemini", "0.61.0")):
        toml = (p.dir / "workflow.toml").read_text().split("\n[backends.command]")[0]
        (p.dir / "workflow.toml").write_text(toml + f'\n[backends.command]\nargv = ["{command}", "--version"]\n')
        p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
        r = run_command_role(p, "spec-reviewer", env=env)
        assert r.returncode == 0 and says in r.stdout, (command, r.stdout + r.stderr)


@needs_bwrap
@needs_claude
def test_claude_code_in_a_fresh_project_approves_a_spec_with_the_roles_mcp_tools(tmp_path: Path) -> None:
    """Issue 35: `workflow init` with claude on PATH, nothing edited, a review-request, then
    `run-role --with-email spec-reviewer`: the real Claude Code, in the sandbox, gets the role's
    tools from `workflow mcp` — the approval reaches spec-writer, the spec is in todo/ in one
    commit of the reviewer's, the request is read."""
    f = fresh_project(tmp_path)
    assert 'backend = "claude-code"' in (f.dir / "workflow.toml").read_text()
    request = f.notify("review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=please review")
    with FakeAnthropic(cli=True) as api:
        api.add(tool_use("mcp__workflow__whoami", {}, "toolu_1"))
        move = {"artifact": "specs/proposed/user-auth.md", "state": "todo", "reason": "complete and testable"}
        api.add(tool_use("mcp__workflow__move_artifact", move, "toolu_2"))
        approval = {
            "event": "approval",
            "artifact": "specs/todo/user-auth.md",
            "to": ["spec-writer"],
            "in_reply_to": request,
            "variables": {"NEXT_STATE": "todo"},
        }
        api.add(tool_use("mcp__workflow__send_message", approval, "toolu_3"))
        api.add(tool_use("mcp__workflow__finish", {"status": "done", "summary": "Approved user-auth."}, "toolu_4"))
        api.add(text("Approved user-auth."))
        r = f.run("run-role", "--with-email", "spec-reviewer", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-x")
        requests = api.requests
    assert r.returncode == 0, r.stdout + r.stderr
    offered = {t["name"] for q in requests for t in q.get("tools", [])}
    assert {"mcp__workflow__finish", "mcp__workflow__send_message", "Bash"} <= offered, offered
    assert not {"WebFetch", "WebSearch"} & offered  # only the tools the profile gives
    results = tool_results(requests)
    assert any("You are spec-reviewer" in t for t in results), results
    assert f.events("spec-writer") == ["approval"]
    assert (f.dir / "specs" / "todo" / "user-auth.md").exists()
    assert not (f.dir / "specs" / "proposed" / "user-auth.md").exists()
    commits = f.commits()
    assert len(commits) == 2 and commits[0].startswith("spec-reviewer "), commits
    assert f.unread("spec-reviewer") == 0
    assert "tokens:" in r.stdout and "Approved user-auth." in r.stdout
