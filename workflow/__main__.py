"""Entry: ``python -m workflow`` runs the CLI."""

from .cli import main

main()
