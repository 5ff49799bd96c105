"""``workflow mcp`` speaks the Model Context Protocol as the official SDK's client expects it, and
relays every call to the run's real tool server: what an agent CLI sees of its tools, with no SDK
in the server (agents.mcpserver), and nothing lost on a bad message or a client that hangs up."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from helpers.git import git_project
from helpers.project import Project
from workflow.agents.tools import SCHEMAS, RoleTools
from workflow.agents.toolserver import ToolServer
from workflow.delivery.transport import make_transport

MCP = [sys.executable, "-I", "-m", "workflow", "mcp", "--tools"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Project, RoleTools, str]]:
    """spec-reviewer's tools, served at a socket as run-role serves a run's."""
    p = git_project(tmp_path / "mcp")
    tools = RoleTools(
        p.app, p.app.roster.roles["spec-reviewer"], make_transport(p.app.config, p.app.deliverer, "direct")
    )
    sock = tmp_path / "tools.sock"
    with ToolServer(tools, sock):
        yield p, tools, str(sock)


def test_the_sdks_client_lists_the_runs_tools_calls_them_and_hears_a_refusal_as_an_error(
    served: tuple[Project, RoleTools, str],
) -> None:
    p, tools, sock = served

    async def session() -> dict[str, Any]:
        params = StdioServerParameters(command=MCP[0], args=[*MCP[1:], sock], cwd=str(p.dir))
        async with Client(params) as client:  # mode "auto": a discover probe first, then initialize
            listed = await client.list_tools()
            read = await client.call_tool("read_artifact", {"path": "specs/proposed/user-auth.md"})
            refused = await client.call_tool("read_artifact", {"path": "../../etc/passwd"})
            unknown = await client.call_tool("no_such_tool", {})
            return {"listed": listed, "read": read, "refused": refused, "unknown": unknown}

    got = anyio.run(session)
    listed = {t.name: (t.description, t.input_schema) for t in got["listed"].tools}
    assert listed == {s["name"]: (s["description"], s["input_schema"]) for s in tools.schemas()}
    assert set(listed) == {s["name"] for s in SCHEMAS}  # every tool of a role's own run
    read, refused, unknown = got["read"], got["refused"], got["unknown"]
    assert not read.is_error and "# User auth" in read.content[0].text
    assert refused.is_error and refused.content[0].text.startswith("refused: ")
    assert unknown.is_error and "unknown tool 'no_such_tool'" in unknown.content[0].text
    assert [c.split("(")[0] for c in tools.calls] == ["read_artifact", "read_artifact", "no_such_tool"]


def talk(sock: str, lines: list[str], cwd: Path) -> list[dict[str, Any]]:
    """Send ``lines`` to ``workflow mcp``, close its stdin, and read every answer it gives."""
    out = subprocess.run(
        [*MCP, sock], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, cwd=cwd
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def request(rid: int, method: str, params: object = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})})


def test_a_bad_message_is_answered_with_its_error_and_the_session_goes_on(
    served: tuple[Project, RoleTools, str],
) -> None:
    p, tools, sock = served
    answers = talk(
        sock,
        [
            request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),  # a notification: no answer
            "{not json",
            json.dumps([1, 2]),
            request(2, "resources/list"),
            request(3, "tools/call", {"name": "whoami"}),
            request(4, "tools/call", {"name": "whoami", "arguments": "not an object"}),
            request(5, "initialize", {"protocolVersion": "1999-01-01"}),
            request(6, "ping"),
        ],
        p.dir,
    )
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"  # the client's version, which we speak
    assert by_id[1]["result"]["capabilities"] == {"tools": {"listChanged": False}}
    errors = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert errors == [-32700, -32600, -32600], answers  # the bad line, then each of the batch's two
    assert by_id[2]["error"]["code"] == -32601 and "resources/list" in by_id[2]["error"]["message"]
    assert "You are spec-reviewer" in by_id[3]["result"]["content"][0]["text"]
    assert by_id[4]["error"]["code"] == -32602
    assert by_id[5]["result"]["protocolVersion"] == "2025-11-25"  # one we do not know: our newest
    assert by_id[6]["result"] == {}
    assert len(answers) == 9  # one answer per request, none for the notification
    assert [c.split("(")[0] for c in tools.calls] == ["whoami"]


def test_a_call_the_client_hung_up_on_is_still_made_and_the_run_hears_it(
    served: tuple[Project, RoleTools, str],
) -> None:
    p, tools, sock = served
    finish = {"name": "finish", "arguments": {"status": "done", "summary": "read it"}}
    answers = talk(sock, [request(1, "tools/call", finish)], p.dir)  # stdin closes right after
    assert answers[0]["result"]["isError"] is False, answers
    assert tools.finished is not None and tools.finished[0] == "done"


def test_no_run_at_the_socket_is_said_and_help_is_the_full_commands(tmp_path: Path) -> None:
    gone = str(tmp_path / "no-run.sock")
    out = subprocess.run([*MCP, gone], input="", capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert f"no run answers at {gone}" in out.stderr and "not a run's socket" in out.stderr
    helped = subprocess.run([*MCP[:-1], "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--tools SOCKET" in helped.stdout and "workflow mcp --tools" in helped.stdout
    bare = subprocess.run(MCP[:-1], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert bare.returncode != 0 and "run inside a run" in bare.stderr  # no socket given nor in $WORKFLOW_TOOLS
