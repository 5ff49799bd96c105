"""Actions: what a button on a page does — mail under the person's identity, through the delivery
path and its guardrails, and the same library calls the CLI makes.

* ``decide`` — approve, request changes or reject a review-request the person's role received.
  The decision is the person's mail (a typed ``approval`` or ``rejection`` to whoever asked,
  threaded under the request), composed and sent as any mail is — so every guardrail and
  visibility rule applies, and a refusal comes back naming its rule — and then applied as their
  move by ``artifacts.decisions.apply``: the transition rules, one commit authored as their role.
  agentd, which applies decisions by mail, is told it is handled, so it is applied once.
* ``answer`` — answer a question, clarification request or blocker-report (``answer``, threaded
  under it, to its sender); for a blocker, optionally move the artifact back to doing/.
* ``resume`` and ``retry`` — ``agentd resume ROLE`` and ``agentd requeue TASK``, for the owner and
  the roles agentd escalates to (they are the ones told of failures), logged in agentd's log.

Each returns a ``Done``: what happened, or why nothing did and what to do.
"""

from __future__ import annotations

from typing import NamedTuple

from workflow.agentd import pending
from workflow.agentd.ledger import record
from workflow.agentd.tasks import Tasks
from workflow.app import App
from workflow.artifacts import decisions
from workflow.artifacts.move import MoveRequest, move
from workflow.core import events
from workflow.core.errors import RuleError, WorkflowError
from workflow.core.locate import Artifact, locate
from workflow.core.senders import local_part
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.mail.rows import Row

VERDICTS = {"approve": "approval", "changes": "rejection", "reject": "rejection"}
MAX_TEXT = decisions.MAX_REASON


class Done(NamedTuple):
    ok: bool
    text: str  # what happened; on a refusal, why and what to do
    rule: str = ""  # the rule that refused, when one did


def _refused(e: WorkflowError) -> Done:
    text = str(e)
    rule = e.args[0].split(":", 1)[0] if isinstance(e, RuleError) else _rule_in(text)
    return Done(False, text, rule)


def _rule_in(text: str) -> str:
    """The rule a server's refusal names (``refusals``: its text begins ``RULE: …``)."""
    for part in text.split(" "):
        if part.endswith(":") and part[:-1].replace("-", "").isalnum() and "-" in part:
            return part[:-1]
    return ""


def _received(app: App, role: str, message_id: str, wanted: tuple[str, ...]) -> Row:
    """The message ``message_id`` as ``role`` received it (from someone else), of one of these events."""
    boxes = app.roster.mailboxes_of(role)
    with app.index() as index:
        index.refresh(boxes)
        rows = [r for r in index.query(boxes, message_ids=[message_id]) if r.event in wanted]
    rows = [r for r in rows if local_part(r.sender, app.config.domain) not in boxes]
    if not rows:
        raise WorkflowError(f"{role} received no {' or '.join(wanted)} {message_id}")
    return rows[0]


def _asker(app: App, row: Row) -> str:
    """The role that sent ``row``: the answer goes to it (mail from anywhere else has no role to answer)."""
    role = local_part(row.sender, app.config.domain)
    if role is None:
        raise WorkflowError(f"{row.message_id} is from {row.sender}, outside {app.config.domain}: no role to answer")
    return role


def _one(app: App, refs: tuple[str, ...]) -> Artifact:
    found = {a.path: a for ref in refs for a in locate(ref, app.config)}
    if len(found) != 1:
        what = ", ".join(sorted(found)) or "no file"
        raise WorkflowError(
            f"{', '.join(refs) or 'the request'} names {what}; a decision applies to exactly one artifact"
        )
    return next(iter(found.values()))


def _clean(text: str) -> str:
    return "".join(c for c in text.replace("\r\n", "\n").strip()[:MAX_TEXT] if c in "\n\t" or c.isprintable())


def decide(app: App, role: str, request: str, verdict: str, reason: str) -> Done:
    """``role``'s decision on the review-request ``request``.

    A person's role (``mode = "human"``) decides as a person at a mail client does: their mail
    first (refused, naming its rule, before anything moves), then ``decisions.apply``. An agent's
    role — the owner viewing as it — decides as ``workflow move --as ROLE --notify`` does: the
    move, then its notification (its rules judged before anything moves). Either is begun in
    agentd's store before its mail and its move (``agentd.pending``): a crash between the click
    and the move leaves it pending, and agentd or the next cockpit carries it out, once."""
    event = VERDICTS.get(verdict)
    if event is None:
        return Done(False, f"unknown decision {verdict!r}; expected one of {', '.join(VERDICTS)}")
    reason = _clean(reason)
    if verdict == "changes" and not reason:
        return Done(False, "say what should change: a request for changes needs its reason")
    d: decisions.Decision | None = None
    try:
        row = _received(app, role, request, ("review-request",))
        artifact = _one(app, row.artifacts)
        source, target = events.DECISIONS[event]
        if artifact.state != source:
            raise WorkflowError(
                f"{artifact.path} is in {artifact.state}/ now; a decision applies to an artifact in {source}/"
            )
        asker = _asker(app, row)
        person = app.roster.roles.get(role)
        human = person is not None and person.mode == "human"
        variables = {events.get(event).reason: reason} if reason else {}
        if not human:
            # the rules judge the notification before anything moves (its state claim aside: the move makes it true)
            probe = app.compose(NotifyRequest(event, (artifact.path,), (asker,), role, request, variables))
            with app.index() as index:
                app.deliverer.prepare(probe.raw, probe.recipients, index)
        if event == "approval":
            variables["NEXT_STATE"] = target
        about = artifact.path if human else artifact.moved(target).path  # an agent's mail follows its move
        composed = app.compose(NotifyRequest(event, (about,), (asker,), role, request, variables))
        d = decisions.Decision(composed.message_id, role, event, (artifact.path,), reason, True, (asker,), asker)
        out = pending.begin(
            app, pending.Pending(d, composed, mail_first=human), make_transport(app.config, app.deliverer)
        )
    except WorkflowError as e:
        if d is None or not _begun(app, d):
            return _refused(e)  # nothing begun, or begun and refused for good: nothing moved
        return Done(
            False,
            f"your {event} is recorded but not carried out yet ({e}); agentd, or the cockpit when it starts "
            "again, sends it and makes the move",
        )
    fields = {"mid": d.message_id, "role": role, "applied": out.applied, "detail": out.detail, "via": "web"}
    record(app.config.state.agentd_log, "decided", fields)
    if not out.applied:
        return Done(False, f"your {event} was not applied: {out.detail}", _rule_in(out.detail))
    app.maildirs.mark_seen(row.mailbox, row.key)  # decided: the request is read, as answering mail makes it
    where = f"{artifact.path} → {target}/ ({out.detail})" if source != target else f"{artifact.path} stays in {source}/"
    return Done(True, f"{event} sent to {asker}; {where}")


def _begun(app: App, d: decisions.Decision) -> bool:
    """Whether a decision is pending in agentd's store (its mail could not go yet)."""
    with Tasks(app.config.state.tasks) as tasks:
        return d.message_id in {mid for mid, _ in tasks.pending_decisions()}


def finish_pending(app: App) -> int:
    """Carry out the decisions a crashed cockpit left pending (``agentd.pending``); each is logged."""

    def said(out: decisions.Outcome) -> None:
        d = out.decision
        fields = {"mid": d.message_id, "role": d.role, "applied": out.applied, "detail": out.detail}
        record(app.config.state.agentd_log, "decided", {**fields, "via": "web (finished after a crash)"})

    with Tasks(app.config.state.tasks) as tasks:
        return pending.recover(app, tasks, lambda: make_transport(app.config, app.deliverer), said)


def answer(app: App, role: str, message_id: str, text: str, unblock: bool = False) -> Done:
    """``role``'s answer to a question, clarification request or blocker-report it received."""
    text = _clean(text)
    if not text:
        return Done(False, "the answer is empty: write what the asker needs to go on")
    try:
        row = _received(app, role, message_id, events.WAITING)
        refs = row.artifacts or (app.config.any_artifact,)
        asker = _asker(app, row)
        reply = events.get(row.event).answer or "answer"
        composed = app.compose(NotifyRequest(reply, refs, (asker,), role, message_id, {"ANSWER": text}))
        composed.send(make_transport(app.config, app.deliverer))
    except WorkflowError as e:
        return _refused(e)
    said = f"answer sent to {asker}"
    if unblock and events.get(row.event).enters == "blocked":
        try:
            said += "; " + _unblock(app, role, row, message_id)
        except WorkflowError as e:
            said += f"; nothing moved: {e}"
    return Done(True, said)


def _unblock(app: App, role: str, row: Row, answered: str) -> str:
    artifact = _one(app, row.artifacts)
    if artifact.state != "blocked":
        return f"{artifact.path} is in {artifact.state}/, not blocked/: nothing moved"
    req = MoveRequest(artifact.path, "doing", role, reason=f"unblocked (answer to {answered})", notified_by="answer")
    res = move(app, req, make_transport(app.config, app.deliverer))
    return f"{artifact.path} → doing/ (commit {res.commit[:12]})" if res.commit else res.subject


def may_steer(app: App, roles: tuple[str, ...] | None) -> bool:
    """Whether a person may resume roles and retry runs: the owner, and the roles agentd tells of failures."""
    if roles is None:
        return True
    told = {app.config.agentd.escalate_to, app.config.agentd.escalate_human or app.config.default_sender}
    return bool(told.intersection(roles))


def resume(app: App, who: str, role: str) -> Done:
    try:
        app.roster.identity(role)
        with Tasks(app.config.state.tasks) as tasks:
            was = tasks.resume(role)
    except WorkflowError as e:
        return _refused(e)
    record(app.config.state.agentd_log, "resumed", {"role": role, "by": who, "via": "web"})
    return Done(True, f"{role}: resumed" + (f" (was paused: {was})" if was else " (was not paused)"))


def retry(app: App, who: str, task: int) -> Done:
    try:
        with Tasks(app.config.state.tasks) as tasks:
            t = tasks.requeue(task)
    except WorkflowError as e:
        return _refused(e)
    record(app.config.state.agentd_log, "requeued", {"role": t.role, "task": t.id, "by": who, "via": "web"})
    return Done(True, f"task {t.id} ({t.role}) queued again")
