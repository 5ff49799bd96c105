"""Seals: which artifacts each review panel holds under a sealed review — panels write, delivery reads.

While a panel's members file their assessments independently, no verdict may reach the panel's
internal address (the ``sealed-review`` guardrail refuses it). The panel seals an artifact when
it opens a review session and unseals it when the assessments go out together; delivery only
asks ``sealed_artifacts``. The table lives in the panels' store, beside the sessions it mirrors.
"""

from __future__ import annotations

import sqlite3
import time

from workflow.core.db import open_db
from workflow.core.statedir import StateDir

SCHEMA = """
CREATE TABLE IF NOT EXISTS seal(request TEXT PRIMARY KEY, panel TEXT NOT NULL, artifact TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS seal_panel ON seal(panel);
"""


class Seals:
    """The seal table over a connection to the panels' store (the panel store shares its own)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(SCHEMA)

    def seal(self, panel: str, request: str, artifact: str) -> None:
        """Hold verdicts about ``artifact`` back from ``panel``'s internal address (idempotent)."""
        self.db.execute(
            "INSERT OR IGNORE INTO seal(request, panel, artifact, at) VALUES (?,?,?,?)",
            (request, panel, artifact, time.time()),
        )

    def unseal(self, request: str) -> None:
        self.db.execute("DELETE FROM seal WHERE request=?", (request,))

    def sealed(self, panel: str) -> list[str]:
        return [str(a) for (a,) in self.db.execute("SELECT artifact FROM seal WHERE panel=? ORDER BY at", (panel,))]


def sealed_artifacts(state: StateDir, panel: str) -> list[str]:
    """The artifacts ``panel`` reviews under seal now (none when no panel ever ran)."""
    if not state.panels.exists():
        return []
    db = open_db(state.panels, what="panel store")
    try:
        return Seals(db).sealed(panel)
    finally:
        db.close()
