"""Entry: ``python -m workflow`` runs the CLI."""

from workflow.cli.main import main

main()
