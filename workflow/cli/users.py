"""CLI users: ``workflow users add`` — a person's login and role in one command (``ops.users``)."""

from __future__ import annotations

import sys

import click

from workflow.cli.base import Command, app
from workflow.ops.users import add as add_user
from workflow.ops.users import add_peer


@click.group()
def users() -> None:
    """People's logins: the users file both servers (SMTP and IMAP) read.

    \b
    Example:
        workflow users add bob --role spec-reviewer
    """


@users.command("add", cls=Command)
@click.argument("login")
@click.option("--role", required=True, metavar="ROLE", help="The role the person takes (made a person's role).")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin's first line (else a prompt).")
@click.pass_context
def add(ctx: click.Context, login: str, role: str, password_stdin: bool) -> None:
    """Add LOGIN as a person taking ROLE: hash the password into [smtp] auth_users_file (set to
    ~/.config/workflow/users if unset), make ROLE human (roles/ROLE.md, mode = "human") and
    approve what this changed. The password never goes on the command line.

    \b
    Example:
        workflow users add bob --role spec-reviewer
    """
    a = app(ctx)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt(f"password for {login}", hide_input=True, confirmation_prompt=True)
    for line in add_user(a.config, login, role, password):
        click.echo(line)


@users.command("peer", cls=Command)
@click.argument("host")
@click.pass_context
def peer(ctx: click.Context, host: str) -> None:
    """Let host HOST's Postfix relay its roles' mail to this host: a login peer-HOST whose secret
    is printed once (kept here only hashed). It may send as the roles that live on HOST, to the
    roles that live here, and nothing else; every guardrail is checked here again.

    \b
    Example:
        workflow users peer build     # on hub: the login build's Postfix uses
    """
    done, secret = add_peer(app(ctx).config, host)
    for line in done:
        click.echo(line)
    click.echo(f"secret (shown once; for host {host}'s relay to this host): {secret}")
