"""Artifacts: state folders in git — legal transitions, moves as commits, hooks, the board."""
