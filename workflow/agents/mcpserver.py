"""MCP server: ``workflow mcp`` — a run's tools for an agent CLI, over stdio (the official ``mcp`` SDK).

The agent CLI (Claude Code, Codex, Gemini CLI) starts ``python -m workflow mcp --tools SOCKET``
inside the run's sandbox, with the run's own interpreter, so PATH does not matter. This process
holds no identity and no rule of its own: it lists the tools the run's tool server offers
(``agents.toolserver``: the same tools, names and schemas as the anthropic backend's, read-only
for a panel member) and relays each call there, outside the sandbox, where run-role checks it as
its role. A refused call comes back as an error result the agent can read and act on.
"""

from __future__ import annotations

import json
from typing import Any

from workflow.agents.toolserver import LIST, call

SERVER_NAME = "workflow"


def tools_of(socket_path: str) -> list[dict[str, Any]]:
    """The schemas of the tools the run at ``socket_path`` offers; OSError when no run is there."""
    answer = call(socket_path, LIST, timeout=30.0)
    tools = answer.get("tools")
    if not isinstance(tools, list):
        raise OSError(f"the run's tool server at {socket_path} did not list its tools")
    return tools


def serve(socket_path: str) -> None:
    """Serve MCP on stdin/stdout until the client closes it."""
    import anyio  # lazy: the SDK and its dependencies load only in this process
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    schemas = tools_of(socket_path)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s["name"], description=s.get("description"), input_schema=s["input_schema"])
                for s in schemas
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            answer = await anyio.to_thread.run_sync(call, socket_path, params.name, dict(params.arguments or {}))
        except (OSError, ValueError) as e:
            answer = {"ok": False, "text": f"failed: the run's tool server did not answer ({e}); your run has ended"}
        text = str(answer.get("text", json.dumps(answer)))
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=not answer.get("ok"))

    server: Server[Any] = Server(
        SERVER_NAME,
        version="1",
        instructions="The tools of your workflow-mail role. End your run with finish.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
