"""CLI demo: ``workflow demo`` — the whole flow in a scratch project, with no API key."""

from __future__ import annotations

from pathlib import Path

import click

from workflow.cli.base import Command
from workflow.ops.demo import run_demo


@click.command(cls=Command)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to create the scratch project (default: a new temporary directory).",
)
def demo(directory: Path | None) -> None:
    """Run the design's Examples 1 and 2 (docs/roles-and-panels.md) in a scratch project and show every
    inbox and the thread.

    Needs no API key and no network.

    \b
    Example:
        workflow demo --dir /tmp/wf-demo
    """
    run_demo(directory, click.echo)
