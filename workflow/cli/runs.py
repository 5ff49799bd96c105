"""CLI runs: a command called by an agent inside a run (``$WORKFLOW_RUN``) joins that run's transaction."""

from __future__ import annotations

import os

from workflow.agents.txn import Run
from workflow.core.errors import RosterError


def inside_run(role: str | None) -> Run | None:
    """The run this command was called from ($WORKFLOW_RUN, set by run-role for an agent), if any;
    ``role`` (--from, --as) must then be the run's role."""
    path = os.environ.get("WORKFLOW_RUN")
    if not path:
        return None
    run = Run.join(path)
    if role and role != run.role:
        raise RosterError(f"inside a run of {run.role}, mail and moves are {run.role}'s, not {role}'s")
    return run
