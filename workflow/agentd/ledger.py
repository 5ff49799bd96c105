"""Ledger: what every ended run does to its role's account — whoever scheduled it.

Every run is agentd's — a bridge's question is mail like any other — and ends here: ``ended``
counts its tokens and cost against the role's daily budget (a spent budget pauses the role and
is escalated) and resets the role's consecutive failures; ``failed`` counts a failure, retries
the task with backoff or dead-letters it (escalated; a bridge's question is also answered with
the failure, so its person hears), and pauses a role after ``pause_after`` failures in a row.
``escalate`` sends a blocker-report about a failing role or a stopped thread to someone who can
act on it — never to the failing role itself; ``tell`` sends one to the bridge address that asked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workflow.agentd.tasks import BRIDGE, MAIL, Task, Tasks, TaskStatus
from workflow.agents.report import RunReport
from workflow.app import App
from workflow.core.config import AgentdConfig
from workflow.core.errors import WorkflowError
from workflow.core.locate import locate
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.mail.rows import Row

Log = Callable[..., None]  # log(event, **fields)
LOG_MIDS = 50  # Message-IDs listed per log line (the rest are counted)


def record(path: Path, event: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Append one event to agentd's log (JSON lines); the fields as written (long lists cut)."""
    mids = fields.get("mids")
    if isinstance(mids, list) and len(mids) > LOG_MIDS:  # a burst's task holds thousands
        fields = {**fields, "mids": mids[:LOG_MIDS], "mids_total": len(mids)}
    rec = {"ts": round(time.time(), 6), "event": event, **fields}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
    return fields


class Ledger:
    """The accounts of one mail root's roles, kept in its task store."""

    def __init__(self, app: App, opts: AgentdConfig, tasks: Tasks, log: Log) -> None:
        self.app, self.opts, self.tasks, self.log = app, opts, tasks, log

    def ended(self, t: Task, report: RunReport, took: float) -> None:
        """A run that succeeded (or had nothing to do): its task completed, its usage counted."""
        mids = list(dict.fromkeys([*t.mids, *report.handed]))
        self.tasks.finish(t.id, TaskStatus.COMPLETED, "" if report.ran else "nothing to do", mids=mids)
        self.tasks.failures(t.role, failed=False)
        self.log("completed", role=t.role, task=t.id, mids=mids, ran=report.ran, took=round(took, 3), **_kind(t))
        self.budget(t, report)

    def budget(self, t: Task, report: RunReport) -> None:
        """Count a run's tokens and cost (a panel's: its members' together, and each member's); a
        role over its daily token budget is paused."""
        for member, used in report.members.items():
            tokens = int(used.get("input_tokens", 0)) + int(used.get("output_tokens", 0))
            self.tasks.add_member_usage(t.role, member, tokens, int(used.get("cost_microusd", 0)))
        if report.cost_microusd > 0:
            self.tasks.add_cost(t.role, report.cost_microusd)
        if not report.tokens:
            return
        total = self.tasks.add_usage(t.role, report.tokens)
        limit = int(self.opts.role_budgets.get(t.role, self.opts.daily_tokens))
        if limit and total > limit:
            why = f"over its daily token budget: {total} > {limit}"
            self.tasks.pause(t.role, why)
            self.log("paused", role=t.role, why=why)
            self.escalate(t, f"{t.role} is paused, {why}; `agentd resume {t.role}` after raising [agentd] budgets")

    def failed(self, t: Task, error: str, report: RunReport | None = None) -> None:
        """A run that failed: retried with backoff, then dead-lettered and escalated (and, for a
        bridge's question, told to the bridge)."""
        n = self.tasks.failures(t.role, failed=True)
        if report is not None:
            self.budget(t, report)
        if t.attempts < self.opts.max_attempts:
            delay = self.opts.retry_backoff * (2 ** (t.attempts - 1))
            self.tasks.finish(t.id, TaskStatus.FAILED, error, retry_at=time.time() + delay)
            self.log("retry", role=t.role, task=t.id, attempt=t.attempts, delay=delay, error=error[:300])
        else:
            self.tasks.finish(t.id, TaskStatus.FAILED, error, dead=True)
            self.log("dead", role=t.role, task=t.id, attempts=t.attempts, error=error[:300], **_kind(t))
            if t.kind == BRIDGE:  # the person on the other side of the bridge hears it, from the role
                self.tell(t, f"{t.role} could not answer ({t.attempts} attempt(s)): {error[:1500]}")
            self.escalate(t, f"{t.role} failed {t.attempts} times and gave up on task {t.id}: {error[:500]}")
        if n >= self.opts.pause_after and t.role not in self.tasks.paused():
            why = f"{n} consecutive failures (pause_after {self.opts.pause_after}); last: {error[:200]}"
            self.tasks.pause(t.role, why)
            self.log("paused", role=t.role, why=why)

    def tell(self, t: Task, details: str) -> None:
        """A bridge's question given up on: a blocker-report from the role to the bridge address
        that asked (``t.ref``), in reply to its last mail, so the bridge answers its person."""
        rows = self._rows(t)
        last = max(rows, key=lambda r: r.id) if rows else None
        artifacts = next((r.artifacts for r in rows if r.artifacts), ())
        self._report(
            t.role, t.ref, details, "sent by agentd: the run failed", artifacts, last.message_id if last else None, t
        )

    def escalation(self, failing: str | None) -> tuple[str, str]:
        """(sender, recipient) of a report about ``failing`` (None: about a thread, not a role).

        It goes to ``[agentd] escalate_to`` (the coordinator) from the failing role; never to the
        failing role itself: when the coordinator's own runs fail, it goes to the human role."""
        app = self.app
        human = self.opts.escalate_human or app.config.default_sender
        to = self.opts.escalate_to
        if to == failing or (to not in app.roster.roles and to not in app.roster.panels):
            to = human
        sender = failing if failing is not None else app.config.default_sender
        if sender == to:
            sender = app.config.default_sender if to != app.config.default_sender else self.opts.escalate_to
        return sender, to

    def escalate(self, t: Task | None, details: str, artifacts: tuple[str, ...] = ()) -> None:
        """A blocker-report about a failing role or a stopped thread, to someone who can act on it."""
        if t is not None and not artifacts:
            artifacts = next((r.artifacts for r in self._rows(t) if r.artifacts), ())
        sender, to = self.escalation(t.role if t is not None else None)
        self._report(sender, to, details, "sent by agentd", artifacts)

    def _rows(self, t: Task) -> list[Row]:
        """The task's mail, as the index has it."""
        if not t.mids:
            return []
        with self.app.index() as index:
            return index.query(message_ids=list(t.mids))

    def _report(
        self,
        sender: str,
        to: str,
        details: str,
        context: str,
        artifacts: Sequence[str] = (),
        in_reply_to: str | None = None,
        t: Task | None = None,
    ) -> None:
        """Send one blocker-report (about the artifact the mail named, wherever it is now; else
        about every artifact) and log it: ``told`` when it answers a bridge's task ``t``."""
        app = self.app
        artifact = artifacts[0] if artifacts else app.config.any_artifact
        found = locate(artifact, app.config)
        if len(found) == 1:
            artifact = found[0].glob  # wherever it is now: the report claims no stale state
        req = NotifyRequest(
            "blocker-report", (artifact,), (to,), sender, in_reply_to, {"BLOCKING_DETAILS": details, "CONTEXT": context}
        )
        what, extra = ("told", {"task": t.id}) if t is not None else ("escalated", {"why": details[:200]})
        try:
            c = app.compose(req)
            c.send(make_transport(app.config, app.deliverer))
            self.log(what, role=sender, to=to, message_id=c.message_id, **extra)
        except WorkflowError as e:
            self.log(f"{'tell' if t is not None else 'escalation'}-failed", role=sender, to=to, error=str(e)[:300])


def _kind(t: Task) -> dict[str, Any]:
    """The log fields naming a bridge's run (none for agentd's own)."""
    return {} if t.kind == MAIL else {"kind": t.kind, "ref": t.ref}
