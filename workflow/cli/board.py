"""CLI board: ``workflow status`` — artifacts by state, with the last workflow mail about each."""

from __future__ import annotations

import json

import click

from workflow.artifacts.board import cards, history, render, to_dict, visible
from workflow.cli import styled
from workflow.cli.base import Command, app, json_option
from workflow.core.locate import find


@click.command(cls=Command)
@click.argument("artifact", required=False)
@click.option("--as", "as_role", metavar="ROLE", help="Include panel-internal mail this member (or panel) received.")
@json_option
@click.pass_context
def status(ctx: click.Context, artifact: str | None, as_role: str | None, as_json: bool) -> None:
    """Show the board: artifacts by state with the last workflow mail about each.

    A card is flagged (!) when the latest X-Workflow-State claim disagrees with the folder or the
    artifact is in two folders. With ARTIFACT, show that artifact's whole mail history.
    Panel-internal mail is left out unless --as names a member (or panel) that received it,
    as for `workflow thread` and `workflow search`.

    \b
    Example:
        workflow status
        workflow status user-auth
        workflow status user-auth --as spec-reviewer-panel.claude
    """
    a = app(ctx)
    only = find(artifact, a.config) if artifact else None
    with a.index() as index:
        index.refresh()
        rows = index.with_artifacts()
    board = cards(a.config, visible(rows, a.roster, as_role), only)
    if as_json:
        click.echo(json.dumps(to_dict(a.config, board), indent=2))
    elif only is not None:
        click.echo(history(board[0], a.config.domain))
    elif styled.wanted():
        styled.board(a.config, board)
    else:
        click.echo(render(a.config, board))
