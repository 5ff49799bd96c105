"""The real Codex CLI, from npm, in the real sandbox, driven by a stand-in Responses API at the
wire: `run-role --backend codex` does a role's work through the role's MCP tools, or fails saying
why and keeps nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from helpers.agent_clis import Fresh, fresh_project, needs_codex, run_page_reads
from helpers.fake_openai import FakeOpenAI, call, custom, offered, text, tool_outputs
from helpers.sandboxing import needs_bwrap
from workflow.agents.backends.reports import codex_report
from workflow.core.resources import builtin_dir

SPEC = "specs/proposed/user-auth.md"


def approval(request: str) -> list[tuple[str, dict[str, Any]]]:
    """The role's tool calls of an approval: move the spec to todo, approve it in the thread, finish."""
    return [
        ("move_artifact", {"artifact": SPEC, "state": "todo", "reason": "complete and testable"}),
        (
            "send_message",
            {"event": "approval", "artifact": "specs/todo/user-auth.md", "to": ["spec-writer"], "in_reply_to": request},
        ),
        ("finish", {"status": "done", "summary": "Approved user-auth."}),
    ]


def script(tool: str, args: dict[str, Any]) -> str:
    """JavaScript for Codex's code mode: call one of the role's MCP tools, give back what it said."""
    return f"const r = await tools.mcp__workflow__{tool}({json.dumps(args)});\ntext(r.content[0].text);\n"


def run(f: Fresh, api: FakeOpenAI) -> subprocess.CompletedProcess[str]:
    """`run-role --with-email --backend codex spec-reviewer` with the owner's OpenAI variables."""
    argv = ("run-role", "--with-email", "--backend", "codex", "spec-reviewer")
    return f.run(*argv, OPENAI_BASE_URL=api.url, OPENAI_API_KEY="sk-x")


@needs_bwrap
@needs_codex
def test_codex_in_a_fresh_project_approves_a_spec_with_the_roles_mcp_tools(tmp_path: Path) -> None:
    """`workflow init`, nothing edited, a review-request, `run-role --backend codex`: Codex's
    default model works in code mode — JavaScript in its `exec` tool calls the role's MCP tools —
    and the approval reaches spec-writer, the spec is in todo/ in one commit of the reviewer's,
    the request is read; the key and the base URL reached Codex from OPENAI_API_KEY and
    OPENAI_BASE_URL, and the tokens the API reported are counted."""
    f = fresh_project(tmp_path)
    request = f.notify("review-request", SPEC, "spec-reviewer", "CONTEXT=please review")
    with FakeOpenAI() as api:
        calls = [("whoami", {}), *approval(request)]
        for i, (tool, args) in enumerate(calls):
            api.add(custom("exec", script(tool, args), f"call_{i}", usage=(321, 12)))
        api.add(text("Approved user-auth.", usage=(321, 12)))
        r = run(f, api)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(api.requests) == 5 and not api.queue, api.other
    assert {h.get("authorization") for h in api.headers} == {"Bearer sk-x"}
    assert len({q["model"] for q in api.requests}) == 1  # the CLI's default, the same every turn
    assert "functions.exec" in offered(api.requests[0]), offered(api.requests[0])
    said = tool_outputs(api.requests)
    assert "You are spec-reviewer" in said["call_0"] and "moved specs/proposed/user-auth.md" in said["call_1"], said
    assert f.events("spec-writer") == ["approval"]
    assert (f.dir / "specs" / "todo" / "user-auth.md").exists()
    assert not (f.dir / SPEC).exists()
    commits = f.commits()
    assert len(commits) == 2 and commits[0].startswith("spec-reviewer "), commits
    assert f.unread("spec-reviewer") == 0
    assert "tokens: 1605 in, 60 out, 5 turn(s)" in r.stdout, r.stdout  # Codex's running total; its 5 requests
    assert "tool calls (4):" in r.stdout and "move_artifact" in r.stdout, r.stdout  # issue 48
    assert "moved specs/proposed/user-auth.md → specs/todo/user-auth.md" in r.stdout, r.stdout
    path = r.stdout.split("transcript: ", 1)[1].split("\n", 1)[0]
    run_page_reads(path)
    assert "Approved user-auth." in Path(path).read_text(), path
    assert "Approved user-auth." in r.stdout


@needs_bwrap
@needs_codex
def test_codex_never_loses_mail_silently_and_gets_the_model_it_is_given(tmp_path: Path) -> None:
    """A model that only talks, then an API that refuses the turn: each run fails saying why, the
    review-request stays unread, nothing is sent or moved. The model `[backends.codex]` names, then
    the one the role names, is the one the API is asked for — a model outside Codex's catalog gets
    the role's tools as the function namespace `mcp__workflow`, and approves through it, also
    without our sandbox (Codex's own then, which must not deny the role's tools)."""
    f = fresh_project(tmp_path)
    request = f.notify("review-request", SPEC, "spec-reviewer")
    toml = (f.dir / "workflow.toml").read_text()
    head, codex = toml.split("[backends.codex]", 1)
    codex = codex.replace('# model = ""', 'model = "gpt-test"', 1)
    (f.dir / "workflow.toml").write_text(f"{head}[backends.codex]{codex}")

    def failed(api: FakeOpenAI) -> str:
        r = run(f, api)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f.unread("spec-reviewer") == 1 and f.events("spec-writer") == []
        assert (f.dir / SPEC).exists() and len(f.commits()) == 1
        return r.stdout

    with FakeOpenAI() as api:
        api.add(text("The spec looks fine to me; I approve it."))
        assert "never called finish" in failed(api)
    assert [q["model"] for q in api.requests] == ["gpt-test"]
    assert {"mcp__workflow.finish", "mcp__workflow.send_message"} <= offered(api.requests[0])
    with FakeOpenAI() as api:
        api.error(400, "invalid_request_error")
        out = failed(api)
        assert "exited with status 1: the agent CLI reported an error" in out and "fake 400" in out, out
    builtin = (builtin_dir("roles") / "spec-reviewer.md").read_text()
    (f.dir / "roles").mkdir(exist_ok=True)
    (f.dir / "roles" / "spec-reviewer.md").write_text(builtin.replace("+++\n", '+++\nmodel = "gpt-role-model"\n', 1))
    # without our sandbox Codex uses its own, where it would ask before any MCP call, and deny it
    (f.dir / "workflow.toml").write_text((f.dir / "workflow.toml").read_text() + '\n[runs]\nsandbox = "none"\n')
    with FakeOpenAI() as api:
        for i, (tool, args) in enumerate(approval(request)):
            api.add(call(tool, args, f"call_{i}", namespace="mcp__workflow"))
        api.add(text("Approved user-auth."))
        r = run(f, api)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {q["model"] for q in api.requests} == {"gpt-role-model"}
    assert "moved specs/proposed/user-auth.md" in tool_outputs(api.requests)["call_0"]
    assert f.events("spec-writer") == ["approval"] and f.unread("spec-reviewer") == 0
    assert (f.dir / "specs" / "todo" / "user-auth.md").exists() and len(f.commits()) == 2


def test_codex_report_reads_codex_0_171_jsonl() -> None:
    """What `codex exec --json` prints: a reconnect it got past is no failure, the usage is the
    last turn's running total, a call of the role's tools Codex refused fails the run."""
    started = '{"type":"thread.started","thread_id":"01a22264-e083-7850-b68e-375b5e3f3834"}'
    done = '{"type":"turn.completed","usage":{"input_tokens":%d,"cached_input_tokens":0,"output_tokens":%d}}'
    said = '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Approved."}}'
    retry = '{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion)"}'
    r = codex_report("\n".join([started, retry, said, done % (10, 5), done % (30, 15)]))
    assert r[:4] == ("Approved.", "01a22264-e083-7850-b68e-375b5e3f3834", "", {"input_tokens": 30, "output_tokens": 15})
    failed = '{"type":"turn.failed","error":{"message":"{\\"error\\": {\\"message\\": \\"fake 400\\"}}"}}'
    assert "fake 400" in codex_report("\n".join([started, retry, failed])).failed
    assert "Reconnecting" in codex_report("\n".join([started, retry])).failed
    why = {"message": "MCP tool call requires approval, but approval policy is never"}
    denied = {"type": "mcp_tool_call", "server": "workflow", "tool": "move_artifact", "status": "failed", "error": why}
    item = json.dumps({"type": "item.completed", "item": denied})
    assert (
        "denied 1 call(s) of the role's tools: move_artifact"
        in codex_report("\n".join([started, item, done % (1, 1)])).failed
    )


def test_codex_report_counts_its_turns_and_lists_its_tool_calls() -> None:
    """Issue 48: Codex runs reported "0 turn(s)" and no tool call. Its turns are its
    ``turn.completed`` events; its calls the completed MCP calls, commands and file changes."""
    mcp = {"type": "mcp_tool_call", "server": "workflow", "tool": "move_artifact", "status": "completed"}
    mcp["arguments"] = {"artifact": "specs/proposed/x.md", "state": "todo"}
    shell = {"type": "command_execution", "command": "bash -lc 'workflow move x todo --as spec-reviewer'"}
    edit = {"type": "file_change", "changes": [{"path": "specs/proposed/x.md", "kind": "update"}]}
    said = {"type": "agent_message", "text": "Done."}
    lines = [json.dumps({"type": "item.completed", "item": i}) for i in (mcp, shell, edit, said)]
    turn = '{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}'
    r = codex_report("\n".join([*lines, turn, *lines[:1], turn]))
    assert r.turns == 2
    assert r.calls == (
        "workflow.move_artifact(artifact=specs/proposed/x.md, state=todo)",
        "shell(bash -lc 'workflow move x todo --as spec-reviewer')",
        "edit(specs/proposed/x.md)",
        "workflow.move_artifact(artifact=specs/proposed/x.md, state=todo)",
    )
