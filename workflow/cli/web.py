"""CLI web: ``workflow web`` — the browser cockpit (``workflow.web``) in the foreground."""

from __future__ import annotations

import logging

import click

from workflow.cli.base import Command, app


@click.command(cls=Command)
@click.option("--host", default=None, help="Address to listen on (default [web] host, 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="Port (default [web] port, 8026; 0 picks a free one)."
)
@click.option(
    "--allow-remote", is_flag=True, help="Allow a non-loopback address (needs HTTPS: [web] tls_cert and tls_key)."
)
@click.pass_context
def web(ctx: click.Context, host: str | None, port: int | None, allow_remote: bool) -> None:
    """Serve the browser cockpit: the board, inboxes and threads, runs and budgets, live.

    People log in with their mail login ([smtp] auth_users_file, the same password their mail
    client uses) and see what their role may see; the owner logs in as ~owner with the secret in
    ~/.config/workflow/credentials and may view as any role. Approve, reject or request changes
    on a review-request, answer a question or a blocker, resume a paused role or retry a failed
    run: each is mail under the person's identity, through the server's rules. Failed logins are
    slowed and logged like the SMTP server's. Listens on 127.0.0.1:8026 by default; Ctrl-C stops it.

    \b
    Example:
        workflow web
        workflow web --port 8080
    """
    from workflow.web.server import check_bind, serve  # lazy: start-up time of the other commands

    logging.basicConfig(level=logging.INFO, format="%(asctime)s web: %(message)s", datefmt="%H:%M:%S")
    a = app(ctx)
    host = host or a.config.web.host
    https = check_bind(host, allow_remote, a)

    def started(url: str) -> None:
        click.echo(f"workflow web: {url} (log in with your mail login; the owner as ~owner)", err=True)

    serve(a, host, a.config.web.port if port is None else port, https, started)
