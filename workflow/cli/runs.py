"""CLI runs: a command called by an agent inside a run (``$WORKFLOW_RUN``) acts as that run.

run-role gives its agent ``$WORKFLOW_ROLE``, ``$WORKFLOW_TOKEN`` (the run's credential),
``$WORKFLOW_SMTP`` (the server to submit to) and ``$WORKFLOW_RUN`` (the one directory of the run
the agent may see). Inside a run, mail goes to the server with the run's credential — the server
checks it and holds it until the run succeeds — and a move is journalled there first, so a failed
run reverts it. Sending or moving as another role is refused here, and again by the server.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from workflow.agents.txn import journal_move
from workflow.core.errors import RosterError, ToolError
from workflow.core.locate import Artifact


class InRun(NamedTuple):
    """The run this process belongs to."""

    role: str
    dir: Path  # $WORKFLOW_RUN: the agent's part of the run directory

    def journal(self, before: Artifact, after: Artifact) -> None:
        journal_move(self.dir, before, after)

    def parent(self, message_id: str) -> tuple[list[str], str] | None:
        """The references and subject of a message the run may reply to (what run-role told it)."""
        try:
            known = json.loads((self.dir / "threads.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        entry = known.get(message_id) if isinstance(known, dict) else None
        if not isinstance(entry, dict):
            return None
        return [str(r) for r in entry.get("refs", [])], str(entry.get("subject", ""))


def inside_run(role: str | None) -> InRun | None:
    """The run this command was called from, if any; ``role`` (--from, --as) must be the run's."""
    path = os.environ.get("WORKFLOW_RUN")
    if not path:
        return None
    me = os.environ.get("WORKFLOW_ROLE", "")
    if not me or not os.environ.get("WORKFLOW_TOKEN") or not Path(path).is_dir():
        raise ToolError(f"$WORKFLOW_RUN={path}: no open run there (it ended, or never began)")
    if role and role != me:
        raise RosterError(f"sender-identity: inside a run of {me}, mail and moves are {me}'s, not {role}'s")
    return InRun(me, Path(path))
