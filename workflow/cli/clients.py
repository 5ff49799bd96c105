"""CLI clients: ``workflow client NAME --login LOGIN`` — a mail client's configuration for this project."""

from __future__ import annotations

import click

from workflow.cli.base import Command, app

NAMES = ("notmuch", "mutt", "neomutt", "msmtp", "mbsync", "thunderbird")


@click.command(cls=Command)
@click.argument("name", type=click.Choice(NAMES), metavar="NAME")
@click.option("--login", required=True, help="A login of [smtp] auth_users_file: whose client this is.")
@click.option(
    "--imap-port",
    type=click.IntRange(1, 65535),
    default=1143,
    show_default=True,
    help="The port `workflow imap` serves.",
)
@click.option(
    "--password-file",
    default=None,
    help="Where the client reads the password (default ~/.config/workflow/LOGIN.password).",
)
@click.pass_context
def client(ctx: click.Context, name: str, login: str, imap_port: int, password_file: str | None) -> None:
    """Print a working configuration of mail client NAME for LOGIN, made from this project.

    notmuch and mutt read the mail root (the owner's machine) and never mark an agent's copy
    read; msmtp sends through `workflow smtpd`; mbsync pulls the login's mailbox over IMAP and
    never pushes; thunderbird prints the account settings. docs/mail-clients.md says more.

    \b
    Example:
        workflow client notmuch --login bob > ~/.notmuch-config-workflow
        workflow client mutt --login bob > ~/.muttrc-workflow
        workflow client msmtp --login bob > ~/.msmtprc-workflow
        workflow client mbsync --login bob --imap-port 1143 > ~/.mbsyncrc-workflow
    """
    from workflow.ops import clients  # lazy: start-up time of the other commands

    setting = clients.setting(app(ctx), login, imap_port, password_file)
    if not setting.human:
        click.echo(
            f"note: {setting.role} is an agent's role: {login} may read its mail and send as it, never mark it "
            f'(set mode = "human" in roles/{setting.role}.md to take the role over)',
            err=True,
        )
    click.echo(clients.client(name).render(setting), nl=False)
