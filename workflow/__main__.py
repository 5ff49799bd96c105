"""Entry: ``python -m workflow`` runs the CLI."""

from workflow.cli.entry import workflow

workflow()
