"""Run report: how one run ended, as the scheduler reads it back — one typed record, one file format.

A run agentd spawned writes its ``RunReport`` to ``$WORKFLOW_RESULT_FILE`` and exits with the
report's ``exit_code``: 0 it succeeded (or had nothing to do), 1 it failed, ``EXIT_BUSY`` another
run held the role (try again later). ``read`` gives the report back (None when the run left none:
it was killed); ``from_outcome`` makes one from what ``run_role`` returned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from workflow.agents.backends import RunResult
from workflow.core.files import write_atomic

EXIT_BUSY = 75  # EX_TEMPFAIL: another run holds the role; try again later
RESULT_ENV = "WORKFLOW_RESULT_FILE"


class RunReport(NamedTuple):
    ok: bool
    ran: bool = True  # False: nothing to do (or busy)
    busy: str = ""  # who held the role's lock
    error: str = ""
    usage: Mapping[str, int] = MappingProxyType({})  # input_tokens, output_tokens, cost_microusd
    turns: int = 0
    handed: tuple[str, ...] = ()  # Message-IDs the run was handed
    summary: str = ""  # what the agent said as it finished
    session: str = ""  # the agent session, for a backend that can resume it
    transcript: str = ""  # the agent CLI's own transcript of the session (a file in the state directory)
    members: Mapping[str, Mapping[str, int]] = MappingProxyType({})  # a panel's: each member's usage (in ``usage``)

    @property
    def exit_code(self) -> int:
        return EXIT_BUSY if self.busy else 0 if self.ok else 1

    @property
    def tokens(self) -> int:
        return int(self.usage.get("input_tokens", 0)) + int(self.usage.get("output_tokens", 0))

    @property
    def cost_microusd(self) -> int:
        return int(self.usage.get("cost_microusd", 0))

    def write(self, path: Path) -> None:
        d = self._asdict()
        d["usage"], d["handed"] = dict(self.usage), list(self.handed)
        d["members"] = {m: dict(u) for m, u in self.members.items()}
        write_atomic(path, json.dumps(d))

    def write_for_scheduler(self) -> None:
        """Write the report where the scheduler that spawned this run asked for it (if one did)."""
        path = os.environ.get(RESULT_ENV)
        if path:
            self.write(Path(path))


def read(path: Path) -> RunReport | None:
    """The report a run wrote; None when there is none (or it is not one: killed mid-write)."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        usage = {str(k): int(v) for k, v in dict(d.get("usage") or {}).items()}
        return RunReport(
            ok=bool(d["ok"]),
            ran=bool(d.get("ran", True)),
            busy=str(d.get("busy", "")),
            error=str(d.get("error", "")),
            usage=MappingProxyType(usage),
            turns=int(d.get("turns", 0)),
            handed=tuple(str(m) for m in d.get("handed", []) if m),
            summary=str(d.get("summary", "")),
            session=str(d.get("session", "")),
            transcript=str(d.get("transcript", "")),
            members=MappingProxyType(
                {str(m): {str(k): int(v) for k, v in dict(u).items()} for m, u in dict(d.get("members") or {}).items()}
            ),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def from_result(result: RunResult | None, handed: tuple[str, ...] = (), busy: str = "") -> RunReport:
    """The report of a run that returned ``result`` (None: nothing ran — nothing to do, or busy)."""
    if result is None:
        return RunReport(ok=not busy, ran=False, busy=busy, handed=handed)
    return RunReport(
        ok=result.ok,
        error=result.error,
        usage=MappingProxyType(dict(result.usage)),
        turns=result.turns,
        handed=handed,
        summary=result.summary,
        session=result.session,
        transcript=result.transcript,
    )
