"""CLI hosts: ``workflow host [NAME]`` — which of the project's ``[hosts]`` this machine is."""

from __future__ import annotations

from pathlib import Path

import click

from workflow.bridges.sections import SECTIONS
from workflow.cli.base import Command, Options, app
from workflow.core.config import load_config
from workflow.core.errors import ConfigError
from workflow.core.files import write_atomic
from workflow.ops.rolefile import with_key


@click.command(cls=Command)
@click.argument("name", required=False)
@click.option(
    "--place",
    "roles",
    metavar="ROLE",
    multiple=True,
    help="Instead: ROLE lives on host NAME (its roles/ file says so; commit it). Repeatable.",
)
@click.pass_context
def host(ctx: click.Context, name: str | None, roles: tuple[str, ...]) -> None:
    """Say which of the project's [hosts] this machine is (NAME), or print it.

    Every host has the same workflow.toml; which one this is lives in the owner's state
    directory (<mail root>/.workflow/host), never in the tree an agent can edit. Its
    listeners then bind that host's address, and its agentd runs the roles that live on it.
    A role lives on the host its roles/ file names (--place writes it), else on the first.

    \b
    Example:
        workflow host                           # which host this is, and how many roles each runs
        workflow host build                     # this machine is [hosts.build]
        workflow host build --place implementer # implementer's runs happen on build
    """
    if roles:
        place(ctx, name, roles)
        return
    if name is None:
        a = app(ctx)
        cfg, ros = a.config, a.roster
        if not cfg.hosts:
            click.echo(f"one host: {cfg.file} lists no [hosts.NAME] table, so every role lives here")
            return
        click.echo(f"this is {cfg.this_host or 'no host yet: `workflow host NAME` names it'}")
        for each in cfg.hosts:
            runs = [r for r in ros.roles if ros.host_of(r) == each.name and ros.roles[r].mode == "async"]
            click.echo(f"  {each.name:<16} {each.address:<22} its agentd runs {len(runs)} role(s)")
        return
    root = ctx.find_root()
    opts = root.obj if isinstance(root.obj, Options) else Options()
    cfg = load_config(opts.config, mail_root=opts.mail_root, plugins=SECTIONS, host=name)
    if not cfg.hosts:
        raise ConfigError(f"{cfg.file} lists no [hosts.NAME] table: add one per machine first (docs/hosts.md)")
    write_atomic(cfg.state.host, name + "\n", mode=0o600)
    h = cfg.host(name)
    assert h is not None
    click.echo(
        f"this machine is host {name}: its listeners bind {h.address}; its agentd runs the roles that live on it"
    )


def place(ctx: click.Context, name: str | None, roles: tuple[str, ...]) -> None:
    """``--place``: each role's ``roles/`` file names host ``name``."""
    a = app(ctx)
    if name is None or a.config.host(name) is None:
        names = ", ".join(h.name for h in a.config.hosts) or "none: add [hosts.NAME] tables first"
        raise click.UsageError(f"--place needs the host it goes on: one of {names}")
    for role in roles:
        if role not in a.roster.roles:
            raise click.UsageError(f"--place {role}: no such role{a.roster.suggest_names(role)}")
        made = with_key(a.config, role, "host", name)
        click.echo(f"{role} lives on {name}: {made or 'already said so'}")
    click.echo("commit roles/ so every host reads it alike")


@click.command(cls=Command)
@click.option("--write", "directory", type=click.Path(path_type=Path), help="Write the instance into DIR.")
@click.option("--queue-lifetime", default="5d", show_default=True, help="How long mail for a host that is down waits.")
@click.option("--retry", default="300s", show_default=True, help="How often Postfix tries a host that is down.")
@click.pass_context
def postfix(ctx: click.Context, directory: Path | None, queue_lifetime: str, retry: str) -> None:
    """Print (or --write) this host's own Postfix instance: it carries the mail of this host's
    roles to the other hosts' workflow smtpd, and keeps it while a host is down.

    Its own main.cf and master.cf, queue, data and log (/etc/postfix untouched), listening on
    loopback for this host's smtpd; transport maps from the roster, a login per peer (the secrets
    other hosts' `workflow users peer THIS` printed, kept in ~/.config/workflow/relay-secrets),
    TLS toward any host off loopback. Postfix runs as root only: it prints the sudo lines that
    hand its files to root and start it, and the one that shows what waits for which host.

    \b
    Example:
        workflow postfix --write ~/.config/workflow/postfix
        workflow postfix             # print it
    """
    from workflow.ops.postfix import SECRETS, certificates, keep_secret, plan, read_secrets, write  # lazy: start-up
    from workflow.ops.users import add_own_relay  # lazy: start-up time

    a = app(ctx)
    target = (directory or Path("DIR")).expanduser().absolute()
    kept = Path(SECRETS).expanduser()
    secrets = read_secrets(kept)
    if directory is not None and a.config.this_host and a.config.this_host not in secrets:
        done, secret = add_own_relay(a.config)  # the login its bounces come back here with
        keep_secret(kept, a.config.this_host, secret)
        secrets[a.config.this_host] = secret
        for line in done:
            click.echo(line)
    client = certificates(a.config, target) if directory is not None else "CLIENT-CERTIFICATE-FINGERPRINT"
    setup = plan(a.config, a.roster, target, secrets, queue_lifetime, retry, client)
    if directory is None:
        for name, text in setup.files.items():
            shown = text if not name.endswith("sasl_passwd") else "(the logins; written 0600 with --write)\n"
            click.echo(f"# ---- {name}\n{shown}")
        return
    write(setup, target)
    write_atomic(a.config.state.relay, f"{target}\n", mode=0o600)  # where `workflow doctor` looks
    click.echo(f"wrote host {a.config.this_host}'s relay instance in {target}")
    click.echo(f"start: {setup.start}")
    click.echo(f"stop: {setup.stop}")
    click.echo(f"queue: {setup.queue}")
