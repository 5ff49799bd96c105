"""Decide: agentd applies the decisions people mail (``artifacts.decisions``), each exactly once.

agentd holds the project, so it makes the moves people decide on by mail. It reads what the human
roles sent since its mark (an index row id, kept in the task store across restarts), applies each
decision once (the store remembers every Message-ID it handled) and logs the outcome; a person's
mail that is no decision gets its effect logged, or an answer saying why it has none
(``agentd.heard``). A decision
made in the cockpit and cut short by a crash is finished here too (``agentd.pending``). The first
time it runs in a project it applies the decisions of the last ``FIRST_LOOKBACK`` seconds, not the
project's whole history.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from workflow.agentd import heard, pending
from workflow.agentd.tasks import Tasks
from workflow.app import App
from workflow.artifacts import decisions
from workflow.delivery.transport import Transport
from workflow.mail.reader import Reader
from workflow.mail.rows import Row

log = logging.getLogger(__name__)

MARK = "decisions"
FIRST_LOOKBACK = 86400.0
BATCH = 500


class Decide:
    """One project's decisions by mail; ``step`` applies those that arrived since the last step."""

    def __init__(
        self,
        app: App,
        tasks: Tasks,
        log: Callable[..., None],
        watch: heard.Watch | None = None,
        idle: Sequence[str] = (),
    ) -> None:
        """``watch``: each role agentd runs → (its mailboxes, its triggers); ``idle``: the roles
        waiting for a backend — what a person's mail that is no decision is judged by (``heard``)."""
        self.app, self.tasks, self.log = app, tasks, log
        self.watch, self.idle = watch or {}, tuple(idle)
        self.people = decisions.people(app)
        self.seen: tuple[tuple[int, int], ...] = ()  # the index files as the last step found them

    def _signature(self) -> tuple[tuple[int, int], ...]:
        """The index's files (size, mtime): every delivery changes them, agentd's reading never does."""
        out = []
        for suffix in ("", "-wal"):
            try:
                st = os.stat(f"{self.app.config.index_path}{suffix}")
                out.append((st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                out.append((0, 0))
        return tuple(out)

    def step(self, transport: Callable[[], Transport]) -> int:
        """Finish the cockpit's decisions a crash left pending (``agentd.pending``), then apply the
        new decisions by mail; returns how many were handled. It reads the index only after
        something was delivered, and only for reading (a sweep's wake must not slow a delivery)."""
        finished = pending.recover(
            self.app, self.tasks, transport, lambda o: self._said(o, via="web, finished by agentd")
        )
        if not self.people:
            return finished
        now = self._signature()
        if now == self.seen:
            return finished
        index = Reader.open(str(self.app.config.index_path))
        if index is None:
            return finished  # no index yet, or one the full commands will upgrade first
        handled = finished
        with index:
            mark = self.tasks.mark(MARK)
            human_since = self._human_since(first_ever=mark is None)
            first = mark is None or mark > index.last_id()  # never run here, or the index was rebuilt
            since = time.time() - FIRST_LOOKBACK
            at = 0 if first or mark is None else mark
            while True:
                rows = index.sent_after(at, self.people, BATCH)
                if not rows:
                    break
                done = self.tasks.decided(r.message_id for r in rows if r.message_id)
                for row in rows:
                    at = row.id
                    if row.message_id is None or row.message_id in done or (first and row.date < since):
                        continue
                    if _delivered(row) < human_since.get(row.sender, 0):
                        continue  # sent while its role was an agent's: never a person's decision
                    done.add(row.message_id)
                    try:
                        d = decisions.read(self.app, index, row)
                    except Exception as e:  # one message that cannot be read never stops the others
                        log.exception("%s: cannot be read as a decision", row.message_id)
                        self.tasks.record_decision(row.message_id, False, f"unreadable: {type(e).__name__}: {e}"[:300])
                        continue
                    if d is None:
                        self._hear(index, row, transport)
                        continue
                    try:
                        outcome = decisions.apply(self.app, d, transport())
                    except Exception as e:  # a bug of ours: logged, the decision is not tried again and again
                        log.exception("%s: applying the decision failed", d.message_id)
                        outcome = decisions.Outcome(d, False, f"failed: {type(e).__name__}: {e}"[:300])
                    self.tasks.record_decision(d.message_id, outcome.applied, outcome.detail)
                    if outcome.sent:  # the notification a plain reply's decision sent is not a decision again
                        self.tasks.record_decision(outcome.sent, True, f"sent for {d.message_id}")
                    self._said(outcome)
                    handled += 1
                self.tasks.set_mark(MARK, at)
                if len(rows) < BATCH:
                    break
            if first and at == 0:
                self.tasks.set_mark(MARK, index.last_id())
        self.seen = now  # after the work: a step that failed is tried again at the next wake
        return handled

    def _hear(self, index: Reader, row: Row, transport: Callable[[], Transport]) -> None:
        """A person's mail that is no decision: its effect, or the answer saying why it has none."""
        try:
            h = heard.hear(self.app, index, row, self.watch, self.idle, transport())
        except Exception as e:  # one message never stops the others
            log.exception("%s: cannot be judged for its effect", row.message_id)
            self.tasks.record_decision(row.message_id or "", False, f"unheard: {type(e).__name__}: {e}"[:300])
            return
        if h is None:
            return
        if h.answer:  # the answer is not a person's mail to be heard again
            self.tasks.record_decision(h.answer, True, f"sent for {h.message_id}")
        # handled once, like a decision: a rebuilt index (which sends the mark back) never answers it twice
        self.tasks.record_decision(h.message_id, bool(h.effect), (h.effect or f"answered: {h.why}")[:300])
        fields: dict[str, Any] = {"role": h.role, "message_id": h.message_id, "typed": h.kind}
        if h.effect:
            self.log("heard", **fields, effect=h.effect)
        else:
            self.log("answered", **fields, answer=h.answer, why=h.why[:300])

    def _human_since(self, first_ever: bool) -> dict[str, int]:
        """Each person's address → when agentd first saw its role as a person's (microseconds; 0: from
        the start): a role made human later does not turn the agent's old mail into decisions. A time,
        not an index row: `workflow reindex` numbers the rows again, and a person's new mail would
        then look older than the change."""
        out: dict[str, int] = {}
        for address in self.people:
            key = f"human-at:{address}"
            n = self.tasks.mark(key)
            if n is None:
                n = 0 if first_ever else time.time_ns() // 1000
                self.tasks.set_mark(key, n)
            out[address] = n
        return out

    def _said(self, o: decisions.Outcome, via: str = "") -> None:
        d = o.decision
        fields: dict[str, Any] = {
            "role": d.role,
            "message_id": d.message_id,
            "decision": d.event,
            "artifacts": list(d.artifacts),
            **({"via": via} if via else {}),
        }
        if o.applied:
            self.log("decided", **fields, result=o.detail)
        else:
            self.log("undecided", **fields, why=o.detail[:300])


def _delivered(row: Row) -> int:
    """When this copy was delivered (microseconds): its Maildir name says (``SECONDS.MUSEC…``),
    else its Date."""
    head, _, rest = row.key.partition(".")
    if not head.isdigit():
        return row.date * 1_000_000
    usec = rest[1:7] if rest.startswith("M") else ""
    return int(head) * 1_000_000 + (int(usec) if usec.isdigit() else 0)
