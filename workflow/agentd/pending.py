"""Pending: a decision made in the cockpit is recorded before its mail and its move, and carried
out again by whoever comes next after a crash — agentd, or the cockpit when it starts.

``workflow web`` used to tell agentd a decision was applied, deliver its mail, then make the move:
killed in between (the move waiting for the project's git lock), the move never happened and
agentd skipped the decision for good. Now a decision is begun in agentd's store
(``Tasks.begin_decision``: the decision and its mail as composed) before anything is sent or
moved, and recorded applied, or refused, only after both (``Tasks.record_decision``). Every step
may be taken again without effect:

* the mail: the same bytes under the same Message-ID, which delivery stores once (a retry after a
  lost ``250``, ``delivery.deliverer``);
* the move: ``artifacts.decisions.apply`` finds the artifact where the decision puts it, committed,
  and calls it applied already.

So after a kill at any moment ``recover`` carries each pending decision out again: the move
happens once and the mail is delivered once. agentd recovers at every look for decisions and the
cockpit when it starts. One decision is carried out at a time (``holding``: a flock on
``<state>/decisions.lock``, released by the kernel when its holder dies), so a recovery never
races a cockpit still working on it. A person's decision is their mail first (the mail is the
decision, as by mail), then the move; an agent role's (the owner deciding as it) the move first,
then its notification, as ``workflow move --notify`` does. A mail refused for good (a rule, a
5xx) ends the decision, recorded not applied; a server that did not answer leaves it pending.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from workflow.agentd.tasks import Tasks
from workflow.app import App
from workflow.artifacts import decisions
from workflow.core.config import Config
from workflow.core.errors import MessageError, RosterError, RuleError, TransportError, WorkflowError
from workflow.delivery import outbox
from workflow.delivery.notify import Composed
from workflow.delivery.transport import Transport

log = logging.getLogger(__name__)


class Pending(NamedTuple):
    """A decision begun: what it is, its mail as composed, and which comes first."""

    decision: decisions.Decision
    mail: Composed
    mail_first: bool  # a person's decision: the mail is the decision, sent before the move

    def dumps(self) -> str:
        m = self.mail
        return json.dumps(
            {
                "decision": self.decision._asdict(),
                "mail": {
                    "raw": base64.b64encode(m.raw).decode("ascii"),
                    "message_id": m.message_id,
                    "sender": m.sender_address,
                    "recipients": list(m.recipients),
                },
                "mail_first": self.mail_first,
            }
        )

    @classmethod
    def loads(cls, data: str) -> Pending:
        """What ``dumps`` wrote; ValueError, KeyError or TypeError for anything else."""
        o = json.loads(data)
        d, m = dict(o["decision"]), o["mail"]
        for name in ("artifacts", "asked_by"):
            d[name] = tuple(str(x) for x in d[name])
        mail = Composed(base64.b64decode(m["raw"]), str(m["message_id"]), str(m["sender"]), tuple(m["recipients"]))
        return cls(decisions.Decision(**d), mail, bool(o["mail_first"]))


@contextmanager
def holding(config: Config, wait: bool = True) -> Iterator[bool]:
    """Hold the decisions' lock (True); with ``wait=False``, False at once when someone holds it."""
    path = config.state.decisions_lock
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            held = False
        else:
            held = True
        yield held
    finally:
        os.close(fd)  # closing releases the flock


def _refusal(mail: Composed, transport: Transport) -> str | None:
    """Send the mail: None once it is delivered (again: stored once), the refusal when it can never
    go; a failure that may pass (no answer, a 4xx, a write that failed) is raised: it stays pending."""
    try:
        mail.send(transport)
    except (RuleError, MessageError, RosterError) as e:
        return str(e)
    except TransportError as e:
        if e.code is not None and 500 <= e.code < 600:
            return str(e)
        raise
    return None


def carry_out(app: App, tasks: Tasks, p: Pending, transport: Transport) -> decisions.Outcome:
    """Carry out a begun decision to its end, recorded (call holding the lock); a mail that may
    still go raises (``_refusal``) and leaves it pending."""
    d = p.decision
    if p.mail_first:
        refused = _refusal(p.mail, transport)
        if refused is not None:
            out = decisions.Outcome(d, False, f"its mail was refused: {refused}")
            tasks.record_decision(d.message_id, False, out.detail)
            return out
    out = decisions.apply(app, d, transport, tell=p.mail_first)
    if out.applied and not p.mail_first:
        refused = _refusal(p.mail, transport)
        if refused is None:
            out = out._replace(sent=p.mail.message_id)
        else:  # the move stands; the refused notification waits where refused ones do
            m = p.mail
            what = f"{d.event} for {', '.join(d.artifacts)} to {', '.join(m.recipients)}"
            outbox.put(app.config, m.raw, m.sender_address, m.recipients, what, refused, failed=True)
            out = out._replace(detail=f"{out.detail}; its {d.event} was refused: {refused}")
    tasks.record_decision(d.message_id, out.applied, out.detail)
    return out


def begin(app: App, p: Pending, transport: Transport) -> decisions.Outcome:
    """Begin a decision and carry it out (the cockpit's click); raises, leaving it pending, when
    its mail may still go later — agentd or the next cockpit finishes it."""
    with holding(app.config), Tasks(app.config.state.tasks) as tasks:
        tasks.begin_decision(p.decision.message_id, p.dumps())
        return carry_out(app, tasks, p, transport)


def recover(
    app: App, tasks: Tasks, transport: Callable[[], Transport], said: Callable[[decisions.Outcome], None]
) -> int:
    """Carry out every decision a crash left pending (none while someone carries one out: it is
    theirs); ``said`` hears each outcome. How many ended."""
    if not tasks.pending_decisions():
        return 0
    with holding(app.config, wait=False) as held:
        if not held:
            return 0
        ended = 0
        for mid, data in tasks.pending_decisions():
            try:
                p = Pending.loads(data)
            except (ValueError, KeyError, TypeError) as e:
                tasks.record_decision(mid, False, f"unreadable: {type(e).__name__}: {e}"[:300])
                continue
            try:
                out = carry_out(app, tasks, p, transport())
            except (WorkflowError, OSError) as e:  # its mail may go later: the next look tries again
                log.warning("%s: the cockpit's decision is still pending: %s", mid, e)
                continue
            said(out)
            ended += 1
        return ended
