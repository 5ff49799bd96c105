"""CLI web: ``workflow web`` — the browser cockpit (``workflow.web``) in the foreground, and
``workflow web login``, the owner's one-time login link from the running cockpit."""

from __future__ import annotations

import logging

import click

from workflow.cli.base import Command, Group, app


@click.group(cls=Group, invoke_without_command=True)
@click.option("--host", default=None, help="Address to listen on (default [web] host, 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="Port (default [web] port, 8026; 0 picks a free one)."
)
@click.option(
    "--allow-remote", is_flag=True, help="Allow a non-loopback address (needs HTTPS: [web] tls_cert and tls_key)."
)
@click.option(
    "--no-link", is_flag=True, help="Print no login link at start (`workflow web login` prints one when asked)."
)
@click.pass_context
def web(ctx: click.Context, host: str | None, port: int | None, allow_remote: bool, no_link: bool) -> None:
    """Serve the browser cockpit: the board, inboxes and threads, runs and budgets, live.

    People log in with their mail login ([smtp] auth_users_file, the same password their mail
    client uses) and see what their role may see. The owner never types a secret: open the
    one-time login link printed at start (good once, for a few minutes, never after a restart), or
    run `workflow web login` for a fresh one; the owner may view as any role. Approve, reject or
    request changes on a review-request, answer a question or a blocker, resume a paused role or
    retry a failed run: each is mail under the person's identity, through the server's rules.
    Failed logins are slowed and logged like the SMTP server's. Listens on 127.0.0.1:8026 by
    default, holding the port on ::1 too (it refuses to start, naming the holder, when either is
    taken); Ctrl-C stops it.

    \b
    Example:
        workflow web
        workflow web --port 8080
        workflow web login
    """
    if ctx.invoked_subcommand is not None:
        return
    from workflow.web.listen import check_bind, serve  # lazy: only `workflow web` loads the server
    from workflow.web.once import LINK_SECONDS  # lazy: start-up time of the other commands

    logging.basicConfig(level=logging.INFO, format="%(asctime)s web: %(message)s", datefmt="%H:%M:%S")
    a = app(ctx)
    host = host or a.config.web.host
    https = check_bind(host, allow_remote, a)

    def started(url: str, link: str | None) -> None:
        click.echo(f"workflow web: {url} (people log in with their mail login)", err=True)
        if link is not None:
            click.echo(
                f"workflow web: the owner's login link, good once for {LINK_SECONDS / 60:g} minutes"
                f" (`workflow web login` prints another): {link}",
                err=True,
            )

    serve(a, host, a.config.web.port if port is None else port, https, started, link=not no_link)


@web.command(cls=Command)
@click.pass_context
def login(ctx: click.Context) -> None:
    """Print a one-time login link for the owner from the running cockpit.

    It asks the running `workflow web` of this mail root over its Unix socket in the state
    directory (only the owner's processes reach it); the link is good once, for a few minutes, and
    never after the server restarts. Open it in the browser: no secret is typed anywhere.

    \b
    Example:
        workflow web login
    """
    from workflow.web.once import ask  # lazy: start-up time of the other commands

    click.echo(ask(app(ctx).config.state.web_socket))
