"""CLI hooks: ``workflow hooks install|flush|run`` — git's pre-commit and post-commit for the project."""

from __future__ import annotations

import sys
import traceback

import click

from workflow.artifacts.announce import post_commit
from workflow.artifacts.gitlock import project_lock
from workflow.artifacts.gitrepo import Repo
from workflow.artifacts.hooks import absolutize_env, install, refuse
from workflow.cli.base import Command, Group, app
from workflow.core.errors import WorkflowError
from workflow.delivery.outbox import flush
from workflow.delivery.transport import make_transport


@click.group(cls=Group)
def hooks() -> None:
    """Git hooks: pre-commit keeps state folders legal, post-commit notifies each move once.

    \b
    Example:
        workflow hooks install
    """


@hooks.command("install", cls=Command)
@click.pass_context
def hooks_install(ctx: click.Context) -> None:
    """Install the pre-commit and post-commit hooks (a hook already there is kept and runs first).

    \b
    Example:
        workflow hooks install
    """
    a = app(ctx)
    for h in install(a.config, Repo(a.config)):
        click.echo(f"{h.hook}: {h.action} ({h.path})")


@hooks.command("flush", cls=Command)
@click.pass_context
def hooks_flush(ctx: click.Context) -> None:
    """Send the notifications queued while mail could not be sent.

    \b
    Example:
        workflow hooks flush
    """
    a = app(ctx)
    sent, left = flush(a.config, make_transport(a.config, a.deliverer), click.echo)
    click.echo(f"sent {sent}, {left} still queued")
    if left:
        sys.exit(1)


@hooks.command("run", cls=Command)
@click.argument("hook", type=click.Choice(["pre-commit", "post-commit"]), metavar="HOOK")
@click.argument("args", nargs=-1)
@click.pass_context
def hooks_run(ctx: click.Context, hook: str, args: tuple[str, ...]) -> None:
    """Run one hook now (git calls this; you rarely need to).

    \b
    Example:
        workflow hooks run pre-commit
    """

    def say(text: str) -> None:
        click.echo(f"workflow {hook}: {text}", err=True)

    absolutize_env()
    try:
        a = app(ctx)
        repo = Repo(a.config)
        if hook == "pre-commit":
            if refuse(a.config, repo, say):
                sys.exit(1)
            return
        with project_lock(a.config):  # queued behind a run's git writes (not when one of them runs us)
            post_commit(a, repo, make_transport(a.config, a.deliverer), say)
    except WorkflowError as e:
        say(f"warning: skipped: {e}")
    except Exception:
        say("warning: internal error, commit kept:\n" + traceback.format_exc())
