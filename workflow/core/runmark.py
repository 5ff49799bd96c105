"""Run mark: whether this process runs inside a run's sandbox, by a mark the agent cannot take away.

run-role's sandbox (``agents.sandbox``) binds a read-only file at ``/.workflow-run``. It is a mount
point directly under the sandbox's root: from inside it cannot be removed, renamed, written or
mounted over (the agent has no capability), and every process there sees it whatever its
environment — ``env -i`` drops ``$WORKFLOW_TOKEN`` and ``$WORKFLOW_RUN``, not the mark. No host has
that file. Owner-side work that would only pretend inside a sandbox asks here first: delivering
mail directly writes into the sandbox's own empty view of the mail root, which nobody reads, so
inside a run it is refused, saying why, instead of reporting a delivery that never happened.

Start-up time: this module imports ``os`` only (the short commands use it).
"""

from __future__ import annotations

import os

MARK = "/.workflow-run"
TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runmark.txt")  # what the mark says


def inside() -> bool:
    """Whether this process runs inside a run's sandbox."""
    return os.path.lexists(MARK)


def no_direct_delivery() -> str | None:
    """Why mail may not be delivered directly here, or None (outside every run)."""
    if not inside():
        return None
    return (
        f"inside a run's sandbox ({MARK} is there) mail goes only through the SMTP server, with the run's "
        "credential ($WORKFLOW_TOKEN, $WORKFLOW_ROLE and $WORKFLOW_SMTP as run-role set them), never "
        "directly: the mail root here is the sandbox's own empty view, and nothing written there reaches anyone"
    )
