"""CLI server: ``workflow smtpd`` — the SMTP server in the foreground, logging one line per message."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from workflow.cli.base import Command, app
from workflow.core.hosts import chosen
from workflow.delivery.credentials import hash_password
from workflow.delivery.server.listeners import check_bind
from workflow.delivery.server.smtpd import serve
from workflow.delivery.server.workers import default_workers, supervise


@click.command(cls=Command)
@click.option("--host", default=None, help="Address to listen on (default [smtp] host, 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="Port (default [smtp] port, 8025; 0 picks a free one)."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback address (needs AUTH required and [smtp] tls_cert/tls_key).",
)
@click.option(
    "--hash-password", "hash_pw", is_flag=True, help="Read a password on stdin, print a users-file secret, exit."
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Server processes sharing the port (default: one per core; 1 serves in this process).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG.")
@click.pass_context
def smtpd(
    ctx: click.Context,
    host: str | None,
    port: int | None,
    allow_remote: bool,
    hash_pw: bool,
    workers: int | None,
    verbose: bool,
) -> None:
    """Run the SMTP server: validate and persist workflow mail into the Maildirs.

    Listens on 127.0.0.1:8025 by default; SIGTERM or Ctrl-C stops it after the transactions in
    flight are stored and answered. One log line per message. Refusals name their rule.

    It runs one worker process per core (--workers), all on the same port; a worker that dies
    is replaced, and every guarantee holds across the workers: a 250 only once the copies and
    their directories are fsynced, a retry stored once whichever worker it reaches, replies
    checked against every worker's copies, one connection cap for all.

    Every submission logs in ([smtp] auth = "required"): the workflow commands of the mail root's
    owner use the owner's credential (~/.config/workflow/credentials, made on first use), an
    agent inside a run its run's credential, and a person's mail client a login from
    [smtp] auth_users_file, a line "login:SECRET:role,role" (the roles it may send as).

    \b
    Example:
        workflow smtpd --port 8025
        workflow smtpd --workers 4
        echo 'alice:'"$(workflow smtpd --hash-password <<< 's3cret')"':user' >> ~/.config/workflow/users
    """
    if hash_pw:
        click.echo(hash_password(sys.stdin.readline().rstrip("\n")))
        return
    logging.basicConfig(  # the time as agentd prints it: `workflow up` shows both in one stream
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s smtpd: %(message)s" if not verbose else "%(asctime)s %(name)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    # One line per message is logged, so nothing per line that the format does not print:
    # the caller's frame, the thread, the process.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # documented in the "Optimization" section of the logging HOWTO
    a = app(ctx)
    chosen(a.config.file, a.config.hosts, a.config.this_host)  # which address is ours: this host's
    host = host or a.config.smtp.host
    check_bind(host, allow_remote, a.config)

    count = workers or default_workers()
    if count == 1:
        serve(a.config, a.deliverer, host, port, lambda bound: None)  # the server logs its start and stop lines
        return
    supervise(a.config, a.deliverer, host, a.config.smtp.port if port is None else port, count, lambda bound: None)


@click.command(cls=Command)
@click.option("--write", "directory", type=click.Path(path_type=Path), help="Write the configuration into DIR.")
@click.option("--port", type=int, default=1143, show_default=True, help="IMAP port.")
@click.option("--listen", default="127.0.0.1", show_default=True, help="Address (non-loopback needs TLS).")
@click.pass_context
def imap(ctx: click.Context, directory: Path | None, port: int, listen: str) -> None:
    """Serve the Maildirs over IMAP to human roles: print (or --write) a Dovecot configuration.

    Each login of [smtp] auth_users_file reads its role's mailbox in any mail client, and
    answers through `workflow smtpd` with the same login; a login sees no other mailbox, and
    may mark and delete its mail but never add any (APPEND, COPY and CREATE are refused: mail
    enters a role's mailbox only through the server). Dovecot runs as the mail root's owner,
    who starts it without sudo; it prints the start and stop lines. Run by root for a project of
    root's, --write makes the system user workflow-mail that Dovecot reads the mail as, and
    hands it the served mailboxes. A new password or a removed
    login counts at once; after adding a login, run the same --write again (no restart).

    \b
    Example:
        workflow imap --write ~/.config/workflow/imap
        workflow imap --port 1143    # print it
    """
    from workflow.ops.imap import plan, write  # lazy: start-up time of the other commands

    a = app(ctx)
    target = directory or Path("DIR")
    setup = plan(a, target, port, listen, make=directory is not None)
    for why in setup.skipped:
        click.echo(f"not served: {why}", err=True)
    if directory is None:
        for name, text in setup.files.items():
            click.echo(f"# ---- {name}\n{text}")
        return
    write(setup, directory)
    for s in setup.served:
        how = ", read-only: an agent's mailbox (make the role human to act on it)" if s.read_only else ""
        click.echo(f"{s.login}: reads {s.maildir} (role {s.role}{how})")
    click.echo(f"start: {setup.start}")
    click.echo(f"stop: {setup.stop}")
