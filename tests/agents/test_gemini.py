"""The real Gemini CLI (npm @google/gemini-cli), in the real sandbox, driven by a stand-in Gemini API
at the wire (``helpers.fake_gemini``): `run-role --backend gemini` gets the role's tools to it by
MCP, and a run that did not do its work never passes for one that did."""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers.agent_clis import Fresh, fresh_project, needs_gemini, run_page_reads
from helpers.fake_gemini import FakeGemini, call, function_responses, text
from helpers.sandboxing import needs_bwrap
from workflow.agents.backends.reports import Report, gemini_error, gemini_report
from workflow.mail.message import parse

TOOLS = "mcp_workflow_"  # Gemini CLI names an MCP tool mcp_SERVER_TOOL


def configure(f: Fresh, **keys: object) -> None:
    """Set keys of ``[backends.gemini]`` in the project's workflow.toml (as the owner edits it)."""
    toml = (f.dir / "workflow.toml").read_text()
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    toml, n = re.subn(r"^\[backends\.gemini\][^\n]*\n", lambda m: m.group(0) + lines, toml, count=1, flags=re.M)
    (f.dir / "workflow.toml").write_text(toml if n else f"{toml}\n[backends.gemini]\n{lines}")


@needs_bwrap
@needs_gemini
def test_gemini_cli_in_a_fresh_project_approves_a_spec_with_the_roles_mcp_tools(tmp_path: Path) -> None:
    """`workflow init` with gemini on PATH, nothing configured, a review-request, then
    `run-role --with-email --backend gemini spec-reviewer`: the real Gemini CLI, in the
    sandbox, reaches the API at GOOGLE_GEMINI_BASE_URL with GEMINI_API_KEY (nothing else set up),
    gets the role's tools from `workflow mcp` (not from the project's .gemini/settings.json) and
    calls them — the approval reaches spec-writer in reply to the request, the spec is in todo/ in
    one commit of the reviewer's, the request is read, and the tokens the API reported are the
    run's."""
    f = fresh_project(tmp_path)
    # the owner's own Gemini settings in the project: the profile's are never read under them
    (f.dir / ".gemini").mkdir()
    mine = {"model": {"maxSessionTurns": 1}, "mcpServers": {"workflow": {"command": "/bin/false"}}}
    (f.dir / ".gemini" / "settings.json").write_text(json.dumps(mine))
    request = f.notify("review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=please review")
    with FakeGemini() as api:
        api.add(call(TOOLS + "whoami", {}, usage=(1000, 11)))
        move = {"artifact": "specs/proposed/user-auth.md", "state": "todo", "reason": "complete and testable"}
        api.add(call(TOOLS + "move_artifact", move, usage=(1100, 12)))
        approval = {"event": "approval", "artifact": "specs/todo/user-auth.md", "to": ["spec-writer"]}
        api.add(call(TOOLS + "send_message", {**approval, "in_reply_to": request}, usage=(1200, 13)))
        api.add(call(TOOLS + "finish", {"status": "done", "summary": "Approved user-auth."}, usage=(1300, 14)))
        api.add(text("Approved user-auth.", usage=(1400, 15)))
        r = f.run("run-role", "--with-email", "--backend", "gemini", "spec-reviewer", **api.env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert api.queue == [] and len(api.requests) == 5, api.requests
    models = {q.model for q in api.requests}  # no model configured: the CLI's own choice, by its router
    assert len(models) == 1 and models.pop().startswith("gemini-"), api.requests
    assert {q.headers.get("x-goog-api-key") for q in api.requests} == {api.env()["GEMINI_API_KEY"]}
    offered = set(api.requests[0].tools)
    ours = {TOOLS + t for t in ("whoami", "list_inbox", "read_thread", "read_artifact", "move_artifact")}
    assert ours | {TOOLS + "write_artifact", TOOLS + "send_message", TOOLS + "finish"} <= offered, offered
    results = dict(function_responses(api.requests))
    assert "You are spec-reviewer" in results[TOOLS + "whoami"], results
    assert "moved specs/proposed/user-auth.md" in results[TOOLS + "move_artifact"], results
    assert "finished: done" in results[TOOLS + "finish"], results
    assert f.events("spec-writer") == ["approval"]
    sent = [parse(m.read_bytes()) for sub in ("new", "cur") for m in (f.maildir("spec-writer") / sub).iterdir()]
    assert [m.in_reply_to for m in sent] == [request]
    assert (f.dir / "specs" / "todo" / "user-auth.md").exists()
    assert not (f.dir / "specs" / "proposed" / "user-auth.md").exists()
    commits = f.commits()
    assert len(commits) == 2 and commits[0].startswith("spec-reviewer "), commits
    assert f.unread("spec-reviewer") == 0
    said = f"tokens: {api.tokens[0]} in, {api.tokens[1]} out, 5 turn(s)"  # the agent's model requests
    assert said in r.stdout and "Approved user-auth." in r.stdout, r.stdout
    assert "tool calls (4):" in r.stdout and TOOLS + "move_artifact(" in r.stdout, r.stdout  # issue 48
    # in the order it made them, with their arguments (stream-json; its JSON object only counts them)
    calls = r.stdout.split("tool calls (4):\n", 1)[1].splitlines()[:4]
    assert [c.strip().split("(", 1)[0] for c in calls] == [
        TOOLS + t for t in ("whoami", "move_artifact", "send_message", "finish")
    ], calls
    assert "state=todo" in calls[1], calls
    assert "moved specs/proposed/user-auth.md → specs/todo/user-auth.md" in r.stdout, r.stdout
    path = r.stdout.split("transcript: ", 1)[1].split("\n", 1)[0]
    run_page_reads(path)
    assert "Approved user-auth." in Path(path).read_text(), path


@needs_bwrap
@needs_gemini
def test_gemini_cli_never_loses_mail_silently(tmp_path: Path) -> None:
    """A model that only talks, an API that refuses the request, a session past its turn limit:
    each run fails saying why, the review-request stays unread, nothing is sent or moved. With no
    model set the CLI picks its own, and its side question (the model router) is answered aside."""
    f = fresh_project(tmp_path)
    f.notify("review-request", "specs/proposed/user-auth.md", "spec-reviewer")

    def fails(api: FakeGemini) -> str:
        r = f.run("run-role", "--with-email", "--backend", "gemini", "spec-reviewer", **api.env())
        assert r.returncode == 1, r.stdout + r.stderr
        assert f.unread("spec-reviewer") == 1 and f.events("spec-writer") == []
        assert (f.dir / "specs" / "proposed" / "user-auth.md").exists() and len(f.commits()) == 1
        assert api.queue == [], api.queue
        return r.stdout

    with FakeGemini() as api:
        api.add(text("The spec looks fine to me; I approve it."))
        out = fails(api)
        assert "never called finish" in out, out
        assert len(api.requests) == 1 and api.requests[0].model.startswith("gemini-"), api.requests
        assert TOOLS + "finish" in api.requests[0].tools
        assert [q.method for q in api.side] == ["generateContent"], api.side  # the router, answered aside
    configure(f, model="gemini-test")
    with FakeGemini() as api:
        api.fail(400, "API key not valid. Please pass a valid API key.")
        out = fails(api)
        said = "the agent CLI reported an error: the API answered 400 INVALID_ARGUMENT: API key not valid"
        assert re.search(rf"gemini\S* exited with status \d+: {said}", out), out
    configure(f, max_turns=1)
    with FakeGemini() as api:
        api.add(call(TOOLS + "whoami", {}))  # its answer would be the second turn
        out = fails(api)
        assert "exited with status 53" in out and "max session turns" in out, out
        assert len(api.requests) == 1, api.requests


def test_gemini_reports_read_what_gemini_cli_prints() -> None:
    """Gemini CLI 0.61's output as printed: the JSON object on stdout (tokens summed over every
    model and role, the agent's own requests its turns); on failure a non-zero status and its error
    object on stderr among warnings and a stack; stream-json lines."""
    tokens = {"input": 50, "prompt": 60, "candidates": 7, "total": 67, "cached": 10, "thoughts": 0, "tool": 0}
    roles = {"main": {"totalRequests": 5}, "utility_router": {"totalRequests": 1}}
    stats = {"models": {"gemini-test": {"tokens": tokens, "roles": roles}, "gemini-lite": {"tokens": tokens}}}
    out = json.dumps({"session_id": "b652ee52-5b65-4c3a-86c7-6b066faf610d", "response": "Done.", "stats": stats})
    report = gemini_report(json.dumps(json.loads(out), indent=2))
    assert report == Report(
        "Done.", "b652ee52-5b65-4c3a-86c7-6b066faf610d", "", {"input_tokens": 120, "output_tokens": 14}, turns=5
    )
    api = {"type": "Error", "message": '{"error":{"code":400,"message":"bad key","status":"INVALID_ARGUMENT"}}'}
    limit = {"type": "FatalTurnLimitedError", "message": "Reached max session turns for this session.", "code": 53}
    for error, said in (
        (api, "the API answered 400 INVALID_ARGUMENT: bad key"),
        (limit, "Reached max session turns for this session. (FatalTurnLimitedError)"),
    ):
        printed = json.dumps({"session_id": "x", "error": error}, indent=2)
        err = f"Warning: 256-color support not detected.\n_ApiError: {{...}}\n    at x (y.js:1:2)\n{printed}\n[ERROR] {printed}\n"
        assert gemini_error(err) == f"the agent CLI reported an error: {said}"
    assert gemini_error("Warning: 256-color support not detected.\n{not json\n") == ""
    lines = [
        {"type": "init", "session_id": "7d5d4140-70b4-4d04-8acb-eebd01d1aef7", "model": "gemini-test"},
        {"type": "message", "role": "user", "content": "Do the thing"},
        {"type": "message", "role": "assistant", "content": "fin", "delta": True},
        {"type": "result", "status": "success", "stats": {"input_tokens": 20, "output_tokens": 10, "tool_calls": 1}},
    ]
    report = gemini_report("\n".join(json.dumps(d) for d in lines))
    assert (report.summary, report.session, report.failed) == ("fin", "7d5d4140-70b4-4d04-8acb-eebd01d1aef7", "")
    assert report.usage == {"input_tokens": 20, "output_tokens": 10}
    lines[-1] = {
        "type": "result",
        "status": "error",
        "error": {"type": "unknown", "message": f"[API Error: {api['message']}]"},
    }
    said = gemini_report("\n".join(json.dumps(d) for d in lines)).failed
    assert said == "the agent CLI reported an error: the API answered 400 INVALID_ARGUMENT: bad key"
