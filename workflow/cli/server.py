"""CLI server: ``workflow smtpd`` — the SMTP server in the foreground, logging one line per message."""

from __future__ import annotations

import logging
import sys

import click

from workflow.cli.base import Command, app
from workflow.delivery.credentials import hash_password
from workflow.delivery.smtpd import check_bind, serve


@click.command(cls=Command)
@click.option("--host", default=None, help="Address to listen on (default [smtp] host, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default [smtp] port, 8025; 0 picks a free one).")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback address (needs AUTH required and [smtp] tls_cert/tls_key).",
)
@click.option(
    "--hash-password", "hash_pw", is_flag=True, help="Read a password on stdin, print a users-file secret, exit."
)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG.")
@click.pass_context
def smtpd(
    ctx: click.Context, host: str | None, port: int | None, allow_remote: bool, hash_pw: bool, verbose: bool
) -> None:
    """Run the SMTP server: validate and persist workflow mail into the Maildirs.

    Listens on 127.0.0.1:8025 by default; SIGTERM or Ctrl-C stops it after the transactions in
    flight are stored and answered. One log line per message. Refusals name their rule.

    Every submission logs in ([smtp] auth = "required"): the workflow commands of the mail root's
    owner use the owner's credential (~/.config/workflow/credentials, made on first use), an
    agent inside a run its run's credential, and a person's mail client a login from
    [smtp] auth_users_file, a line "login:SECRET:role,role" (the roles it may send as).

    Examples:

        workflow smtpd --port 8025

        echo 'alice:'"$(workflow smtpd --hash-password <<< 's3cret')"':user' >> ~/.config/workflow/users
    """
    if hash_pw:
        click.echo(hash_password(sys.stdin.readline().rstrip("\n")))
        return
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    a = app(ctx)
    host = host or a.config.smtp.host
    check_bind(host, allow_remote, a.config)

    def ready(bound: int) -> None:
        click.echo(f"workflow smtpd listening on {host}:{bound}, mail root {a.config.mail_root}", err=True)

    stats = serve(a.config, a.deliverer, host, port, ready)
    click.echo(f"stopped: {stats.delivered} delivered, {stats.refused} refused, {stats.failed} failed", err=True)
