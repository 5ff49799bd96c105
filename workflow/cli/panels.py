"""CLI panels: ``workflow panel review|status|write|answer`` — several models acting as one role."""

from __future__ import annotations

import json

import click

from workflow.app import App
from workflow.cli.base import Command, Group, app, backend_option, json_option, via_option
from workflow.core.config import PanelConfig
from workflow.core.errors import RosterError
from workflow.core.locate import find
from workflow.delivery.transport import make_transport
from workflow.panels.review import dumps_status, run_panel, status_rows
from workflow.panels.store import SessionState
from workflow.panels.writing import answer_discussion, write


def _panel(a: App, name: str) -> PanelConfig:
    p = a.config.panel(name)
    if p is None:
        raise RosterError(f"no panel {name!r}; configured: {', '.join(x.name for x in a.config.panels) or 'none'}")
    return p


@click.group(cls=Group)
def panel() -> None:
    """Review panels: independent, sealed reviews by several models, one unified decision.

    \b
    Example:
        workflow panel status user-auth
    """


@panel.command("review", cls=Command)
@click.argument("name")
@backend_option
@via_option
@click.pass_context
def panel_review(ctx: click.Context, name: str, backend: str | None, via: str) -> None:
    """Run panel NAME on its pending review-requests: sealed assessments, discussion, consensus, decision.

    \b
    Example:
        workflow panel review spec-reviewer-panel
    """
    a = app(ctx)
    sessions = run_panel(a, _panel(a, name), make_transport(a.config, a.deliverer, via), click.echo, backend)
    if any(s.state == SessionState.SEALED for s in sessions):
        click.echo("some reviews stay sealed until every member files or the deadline passes; run this again then")


@panel.command("status", cls=Command)
@click.argument("artifact", required=False)
@json_option
@click.pass_context
def panel_status(ctx: click.Context, artifact: str | None, as_json: bool) -> None:
    """Show each panel session: who filed, verdicts once unsealed, the consensus and decision.

    \b
    Example:
        workflow panel status user-auth
    """
    a = app(ctx)
    rows = status_rows(a, artifact)
    if artifact and not rows and not artifact.startswith("<"):
        find(artifact, a.config)  # a name that is no artifact is refused, with a suggestion
    click.echo(json.dumps([r.to_dict() for r in rows], indent=2) if as_json else dumps_status(rows))


@panel.command("write", cls=Command)
@click.argument("name")
@click.argument("artifact")
@click.option(
    "--section", "sections", multiple=True, required=True, metavar="TITLE", help="A section, in order (repeatable)."
)
@click.option("--brief", default="", help="What the artifact is about (given to every member).")
@backend_option
@via_option
@click.pass_context
def panel_write(
    ctx: click.Context, name: str, artifact: str, sections: tuple[str, ...], brief: str, backend: str | None, via: str
) -> None:
    """Writing panel NAME writes ARTIFACT section by section, then sends the review-request.

    \b
    Example:
        workflow panel write spec-writer-panel search --section Overview --section Errors --brief "Search specs"
    """
    from workflow.panels.members import Spent  # lazy: only this command pays for the panels

    a = app(ctx)
    spent = Spent()
    transport = make_transport(a.config, a.deliverer, via)
    write(a, _panel(a, name), artifact, sections, transport, click.echo, backend, brief, spent)
    for line in spent.lines():
        click.echo(f"  {line}")


@panel.command("answer", cls=Command)
@click.argument("name")
@backend_option
@via_option
@click.pass_context
def panel_answer(ctx: click.Context, name: str, backend: str | None, via: str) -> None:
    """The primary of writing panel NAME answers the clarifications waiting on the discussion address.

    \b
    Example:
        workflow panel answer spec-writer-panel
    """
    a = app(ctx)
    n = answer_discussion(a, _panel(a, name), make_transport(a.config, a.deliverer, via), click.echo, backend)
    click.echo(f"{n} answered")
