"""CLI main: the ``workflow`` group — every command family, loaded only when its command runs.

``COMMANDS`` is the registry (name → module and attribute), read by ``--help`` and by dispatch;
a command's module is imported only when that command (or the full help) is asked for, so a
short command such as ``workflow inbox`` starts without the daemons', bridges' and panels' code.
"""

from __future__ import annotations

import importlib

import click

from workflow.cli.base import CONTEXT, Group, Options, run_script
from workflow.core.interrupts import deferred

COMMANDS = {
    "notify": "workflow.cli.notify:notify",
    "inbox": "workflow.cli.mail:inbox",
    "thread": "workflow.cli.mail:thread",
    "read": "workflow.cli.mail:read",
    "search": "workflow.cli.mail:search",
    "reindex": "workflow.cli.mail:reindex",
    "roster": "workflow.cli.roster:roster",
    "route": "workflow.cli.roster:route",
    "guardrails": "workflow.cli.roster:guardrails",
    "backends": "workflow.cli.roster:backends",
    "events": "workflow.cli.events:events",
    "smtpd": "workflow.cli.server:smtpd",
    "imap": "workflow.cli.server:imap",
    "web": "workflow.cli.web:web",
    "client": "workflow.cli.clients:client",
    "up": "workflow.cli.agentd:up",
    "agentd": "workflow.cli.agentd:agentd",
    "run-role": "workflow.cli.run:run_role",
    "mcp": "workflow.cli.agent:mcp",
    "finish": "workflow.cli.agent:finish",
    "init": "workflow.cli.project:init",
    "move": "workflow.cli.project:move",
    "status": "workflow.cli.board:status",
    "doctor": "workflow.cli.project:doctor",
    "trust": "workflow.cli.project:trust",
    "users": "workflow.cli.users:users",
    "demo": "workflow.cli.demo:demo",
    "hooks": "workflow.cli.hooks:hooks",
    "host": "workflow.cli.hosts:host",
    "postfix": "workflow.cli.hosts:postfix",
    "panel": "workflow.cli.panels:panel",
    "bridge": "workflow.cli.bridges:bridge",
}


class LazyGroup(Group):
    """A group whose subcommands come from ``COMMANDS``, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        with deferred():  # a Ctrl-C during the command's imports is raised after them, never lost in one
            cmd = getattr(importlib.import_module(module), attr)
        if not isinstance(cmd, click.Command):
            raise TypeError(f"{target} is not a click command")
        return cmd


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.version_option(package_name="workflow-mail")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """workflow-mail: Maildir-native workflow mail for AI agent roles and humans.

    \b
    Example:
        workflow demo
    """
    if not isinstance(ctx.obj, Options):  # --config / --mail-root, here or after any subcommand (base._Errors)
        ctx.obj = Options()


def main() -> None:
    run_script(cli, "workflow")
