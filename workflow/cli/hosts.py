"""CLI hosts: ``workflow host [NAME]`` — which of the project's ``[hosts]`` this machine is."""

from __future__ import annotations

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
