"""Entry: ``python -m workflow`` runs the CLI."""

from workflow.cli.root import main

main()
