"""CLI agent: the commands an agent calls from inside its run — ``workflow mcp`` and ``workflow finish``.

run-role gives a command-backend agent ``$WORKFLOW_TOOLS``, the socket of its run's tool server
(``agents.toolserver``). ``workflow mcp`` serves those tools to an agent CLI over stdio;
``workflow finish`` ends the run from a shell, as the MCP ``finish`` tool does: a run commits
only when its agent finished with ``done``.
"""

from __future__ import annotations

import os

import click

from workflow.agents.toolwire import call
from workflow.cli import fast
from workflow.cli.base import Command, option
from workflow.core.errors import ToolError, UsageError


def _socket(given: str | None) -> str:
    path = given or os.environ.get("WORKFLOW_TOOLS", "")
    if not path:
        raise UsageError("no run's tools here: run inside a run (run-role sets $WORKFLOW_TOOLS) or pass --tools")
    return path


@click.command(cls=Command)
@option(fast.TOOLS)
def mcp(tools: str | None) -> None:
    """Serve the run's tools to an agent CLI over stdio (the Model Context Protocol).

    Agent CLIs start it themselves, from the profile run-role gives them (the claude-code
    profile passes it to claude -p in --mcp-config, as python3 -I -m workflow mcp); it relays
    each call to the run, which checks it as the run's role. It runs on the fast path (cli.fast),
    without click, unless asked for help.

    \b
    Example:
        workflow mcp --tools "$WORKFLOW_TOOLS"
    """
    from workflow.agents import mcpserver  # lazy: only this command serves MCP

    path = _socket(tools)
    try:
        mcpserver.serve(path)
    except OSError as e:
        raise ToolError(mcpserver.no_run(path, e)) from None


@click.command(cls=Command)
@click.argument("status", type=click.Choice(["done", "failed"]), metavar="STATUS")
@click.argument("summary", required=False, default="")
@option(fast.TOOLS)
def finish(status: str, summary: str, tools: str | None) -> None:
    """End this run: ``done`` keeps what it did, ``failed`` keeps nothing.

    Without ``workflow finish done`` (or the MCP tool finish) a run keeps nothing: its mail stays
    unread for a later run and nothing it queued is sent.

    \b
    Example:
        workflow finish done "approved specs/todo/auth.md and told spec-writer"
        workflow finish failed "the spec names a file that does not exist"
    """
    path = _socket(tools)
    try:
        answer = call(path, "finish", {"status": status, "summary": summary})
    except (OSError, ValueError) as e:
        raise ToolError(f"no run answers at {path}: {e} (the run ended, or this is not a run's socket)") from None
    if not answer.get("ok"):
        raise ToolError(str(answer.get("text", "refused")))
    click.echo(str(answer.get("text", "")))
