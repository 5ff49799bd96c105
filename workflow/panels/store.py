"""Panel store: review sessions and their sealed assessments, in the state directory's panels.sqlite.

A session is keyed by its review-request's Message-ID and moves sealed → unsealing → discussion
→ decided. Opening a session seals its artifact (``mail.seals``, read by delivery's
``sealed-review`` guardrail) in the same transaction; leaving ``sealed`` unseals it.
"""

from __future__ import annotations

import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from workflow.core.config import PanelConfig
from workflow.core.db import open_db
from workflow.core.errors import WorkflowError
from workflow.mail.seals import Seals

SCHEMA = """
CREATE TABLE IF NOT EXISTS session(request TEXT PRIMARY KEY, panel TEXT NOT NULL, artifact TEXT NOT NULL,
  requester TEXT NOT NULL, opened REAL NOT NULL, deadline REAL NOT NULL, state TEXT NOT NULL,
  thread TEXT, decision TEXT, decision_mid TEXT, tally TEXT, moved INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS assessment(request TEXT NOT NULL, member TEXT NOT NULL, phase TEXT NOT NULL,
  verdict TEXT, findings TEXT NOT NULL, raw BLOB, mid TEXT, filed REAL NOT NULL, PRIMARY KEY(request, member, phase));
"""
SESSION_COLS = (
    "request, panel, artifact, requester, opened, deadline, state, thread, decision, decision_mid, tally, moved"
)


class SessionState(StrEnum):
    SEALED = "sealed"  # members file independently; nothing reaches the internal address
    UNSEALING = "unsealing"  # the held assessments are being delivered into the internal thread
    DISCUSSION = "discussion"
    DECIDED = "decided"


class Assessment(NamedTuple):
    member: str
    phase: str  # "assessment" | "discussion-N" | "timeout"
    verdict: str | None
    findings: str
    filed: float


class Session(NamedTuple):
    request: str
    panel: str
    artifact: str
    requester: str
    opened: float
    deadline: float
    state: SessionState
    thread: str | None
    decision: str | None
    decision_mid: str | None
    tally: str | None
    moved: bool


class PanelStore:
    """Panel sessions and their (sealed) assessments; safe to share between a panel's threads."""

    def __init__(self, path: Path) -> None:
        self.db = open_db(path, what="panel store", schema=SCHEMA)
        self.seals = Seals(self.db)
        # Sessions sealed by a version that kept no seal table are sealed again here.
        self.db.execute(
            "INSERT OR IGNORE INTO seal(request, panel, artifact, at) "
            "SELECT request, panel, artifact, opened FROM session WHERE state=?",
            (SessionState.SEALED.value,),
        )
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> PanelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, request: str, panel: PanelConfig, artifact: str, requester: str) -> Session:
        """The session for a review-request, opened sealed (with its seal) the first time."""
        now = time.time()
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                cur = self.db.execute(
                    f"INSERT OR IGNORE INTO session({SESSION_COLS}) VALUES (?,?,?,?,?,?,?,NULL,NULL,NULL,NULL,0)",
                    (request, panel.name, artifact, requester, now, now + panel.deadline, SessionState.SEALED.value),
                )
                if cur.rowcount == 1:
                    self.seals.seal(panel.name, request, artifact)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return self.get(request)

    def get(self, request: str) -> Session:
        row = self.db.execute(f"SELECT {SESSION_COLS} FROM session WHERE request=?", (request,)).fetchone()
        if row is None:
            raise WorkflowError(f"no panel session for {request}")
        return Session(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            str(row[3]),
            float(row[4]),
            float(row[5]),
            SessionState(row[6]),
            row[7],
            row[8],
            row[9],
            row[10],
            bool(row[11]),
        )

    def sessions(self) -> list[Session]:
        rows = self.db.execute("SELECT request FROM session ORDER BY opened").fetchall()
        return [self.get(r[0]) for r in rows]

    def update(self, request: str, **fields: Any) -> None:
        """Set session columns; a state other than sealed lifts the session's seal with it."""
        unknown = set(fields) - set(SESSION_COLS.split(", ")[6:])
        if unknown:
            raise WorkflowError(f"panel session has no {', '.join(sorted(unknown))}")
        values = [str(v) if isinstance(v, SessionState) else v for v in fields.values()]
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute(f"UPDATE session SET {cols} WHERE request=?", (*values, request))
                if "state" in fields and fields["state"] != SessionState.SEALED:
                    self.seals.unseal(request)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def file(
        self, request: str, member: str, phase: str, verdict: str | None, findings: str, raw: bytes | None = None
    ) -> None:
        with self.lock:
            self.db.execute(
                "INSERT OR REPLACE INTO assessment(request, member, phase, verdict, findings, raw, filed) "
                "VALUES (?,?,?,?,?,?,?)",
                (request, member, phase, verdict, findings, raw, time.time()),
            )

    def assessments(self, request: str, phase: str | None = None) -> list[Assessment]:
        sql = "SELECT member, phase, verdict, findings, filed FROM assessment WHERE request=?"
        args: list[Any] = [request]
        if phase:
            sql += " AND phase=?"
            args.append(phase)
        return [Assessment(*r) for r in self.db.execute(sql + " ORDER BY filed", args)]

    def held(self, request: str) -> list[tuple[str, bytes]]:
        return [
            (m, bytes(raw))
            for m, raw in self.db.execute(
                "SELECT member, raw FROM assessment WHERE request=? AND phase='assessment' AND raw IS NOT NULL ORDER BY filed",
                (request,),
            )
        ]
