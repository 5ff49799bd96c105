"""CLI users: ``workflow users add`` — a person's login and role in one command (``ops.users``)."""

from __future__ import annotations

import sys

import click

from workflow.cli.base import Command, app
from workflow.ops.users import add as add_user


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
