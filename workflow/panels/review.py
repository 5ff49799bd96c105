"""Panel: a review panel of several models — independent by construction, one voice in the end.

A review-request to ``{kind}-reviewer-panel@`` opens a session. Each member gets a fresh,
read-only session (the reviewer prompt, the artifact, the request — nothing else) on its own
backend and ends its answer with ``VERDICT: approve|reject|revise``. Assessments are **sealed**:
they are held in the session store, not delivered, until every member has filed or the
deadline passes (and the ``sealed-review`` guardrail refuses any assessment mail to the internal
address meanwhile), so nobody herds. Then they go to ``{panel}-internal@`` as one thread with
``X-Review-Verdict`` headers, ``rounds`` discussion turns follow there (a member may change its
verdict), and the consensus rule (unanimous | majority | any-reject) decides. The panel sends one
unified approval or rejection to the requester — a new thread, no reference to internal mail —
listing the findings and recording dissent; on approval the artifact moves, exactly once.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from workflow.agents.backends import RunResult
from workflow.app import App
from workflow.artifacts.move import MoveRequest, move
from workflow.core import safeopen
from workflow.core.addresses import internal_address
from workflow.core.config import PanelConfig
from workflow.core.errors import ArtifactError, WorkflowError
from workflow.core.locate import locate
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.body import body_text
from workflow.mail.inbox import render_thread, thread_rows, unique
from workflow.mail.message import parse
from workflow.mail.rows import Row
from workflow.panels.members import Spent, base_prompt, internal_note, run_member
from workflow.panels.store import Assessment, PanelStore, Session, SessionState

VERDICTS = ("approve", "reject", "revise")
VERDICT_RE = re.compile(r"^\s*\**\s*VERDICT\s*:\s*\**\s*(approve|reject|revise)\b\**", re.IGNORECASE | re.MULTILINE)


def parse_verdict(text: str) -> tuple[str | None, str]:
    """The last ``VERDICT:`` line's value and the findings (everything else)."""
    found = VERDICT_RE.findall(text or "")
    findings = VERDICT_RE.sub("", text or "").strip()
    return (found[-1].lower() if found else None), findings


def consensus(rule: str, verdicts: dict[str, str | None]) -> tuple[str, str]:
    """("approve" | "reject", how) under a rule; a member without a verdict never approves."""
    n = len(verdicts)
    approve = sum(1 for v in verdicts.values() if v == "approve")
    reject = sum(1 for v in verdicts.values() if v == "reject")
    revise = sum(1 for v in verdicts.values() if v == "revise")
    missing = n - approve - reject - revise
    tally = f"{approve} approve, {reject} reject, {revise} revise" + (f", {missing} no verdict" if missing else "")
    if rule == "unanimous":
        ok = approve == n
    elif rule == "majority":
        ok = approve * 2 > n
    elif rule == "any-reject":
        ok = reject == 0 and approve > 0
    else:
        raise WorkflowError(f"unknown consensus rule {rule!r}")
    return ("approve" if ok else "reject"), f"{rule}: {tally}"


def artifact_text(app: App, artifact_path: str) -> str:
    """The artifact as a member reads it (through safeopen: no symlink is followed)."""
    try:
        return safeopen.read(app.config, artifact_path).decode("utf-8", "replace")
    except ArtifactError as e:
        return f"(the artifact cannot be shown: {e})"


def member_prompt(app: App, panel: PanelConfig, member: str, artifact_path: str, request_text: str) -> str:
    """A member's whole context: the reviewer prompt, the artifact, the request — nothing else."""
    prompt = base_prompt(app, panel)
    data = artifact_text(app, artifact_path)
    return (
        f"# Role: {panel.name}.{member}\n\n{prompt}\n\n"
        f"# Independent review\nYou are {member}, one member of {panel.name}. Review on your own: you cannot see the "
        "other members' assessments until everyone has filed. Give concrete findings, then end with one line:\n"
        "VERDICT: approve | reject | revise\n\n"
        f"# The request\n\n{request_text.strip()}\n\n# The artifact: {artifact_path}\n\n````\n{data.rstrip()}\n````\n"
    )


def discussion_prompt(
    app: App, panel: PanelConfig, member: str, artifact_path: str, thread_text: str, round_no: int
) -> str:
    prompt = base_prompt(app, panel)
    data = artifact_text(app, artifact_path)
    return (
        f"# Role: {panel.name}.{member}\n\n{prompt}\n\n# Discussion round {round_no}\nEvery member's assessment is "
        "now visible below. Respond to the others' findings; you may keep or change your verdict. End with one line:\n"
        "VERDICT: approve | reject | revise\n\n"
        f"# The panel's internal thread\n\n{thread_text.strip()}\n\n# The artifact: {artifact_path}\n\n````\n{data.rstrip()}\n````\n"
    )


def _run_members(
    app: App,
    panel: PanelConfig,
    prompts: dict[str, str],
    deadline: float,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None,
    spent: Spent | None = None,
) -> dict[str, RunResult | None]:
    """Each member on its own backend, all at once; a member still running at the deadline gets None.
    What each member's run used is added to ``spent`` (the panel's run counts it, member by member)."""
    results: dict[str, RunResult | None] = dict.fromkeys(prompts)

    def one(member: str) -> None:
        results[member] = run_member(app, panel, member, prompts[member], transport, backend)

    threads = {m: threading.Thread(target=one, args=(m,), daemon=True, name=f"panel-{m}") for m in prompts}
    for t in threads.values():
        t.start()
    for m, t in threads.items():
        t.join(max(0.0, deadline - time.time()))
        if t.is_alive():
            echo(f"  {m}: no assessment by the deadline")
    done = {m: (results[m] if not threads[m].is_alive() else None) for m in prompts}
    for m, res in done.items():
        if res is None:
            continue
        if spent is not None:
            spent.add(m, res)
        echo(f"  {m}: tool calls ({len(res.calls)})" + "".join(f"\n    {c}" for c in res.calls))
        if res.transcript:
            echo(f"  {m}: transcript: {res.transcript}")
    return done


def review(
    app: App,
    panel: PanelConfig,
    request: Row,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None = None,
    spent: Spent | None = None,
) -> Session:
    """Run (or resume) the panel session for one review-request, through to the unified decision."""
    if panel.kind != "review":
        raise WorkflowError(f"{panel.name} is a {panel.kind} panel; only review panels review")
    if not request.artifacts:
        raise WorkflowError(f"review-request {request.message_id} names no artifact")
    found = locate(request.artifacts[0], app.config)
    if len(found) != 1:
        raise WorkflowError(
            f"review-request {request.message_id}: artifact {request.artifacts[0]} "
            f"{'not found' if not found else 'is in several state folders'}"
        )
    artifact = found[0]
    requester = app.roster.sender(request.sender)
    with PanelStore(app.config.state.panels) as store:
        s = store.open(request.message_id or "", panel, artifact.path, requester)
        if s.state == SessionState.SEALED:
            echo(
                f"{panel.name}: independent review of {artifact.path} by {', '.join(m.name for m in panel.members)} (sealed)"
            )
            entry = app.maildirs.find(request.mailbox, request.key)
            text = ""
            if entry is not None:
                raw = entry.path.read_bytes()
                text = f"From: {request.sender}\nSubject: {request.subject}\n\n{body_text(raw, parse(raw))}"
            filed = {a.member for a in store.assessments(s.request, "assessment")}
            todo = {
                m.name: member_prompt(app, panel, m.name, artifact.path, text)
                for m in panel.members
                if m.name not in filed
            }
            if todo:
                results = _run_members(app, panel, todo, s.deadline, transport, echo, backend, spent)
                for member, res in results.items():
                    if res is None:
                        store.file(s.request, member, "timeout", None, "no assessment by the deadline")
                        continue
                    verdict, findings = parse_verdict(res.summary if res.ok else "")
                    if not res.ok:
                        findings = f"(the member's run failed: {res.error})"
                    raw = _assessment_mail(app, panel, member, artifact.path, verdict, findings)
                    store.file(s.request, member, "assessment", verdict, findings, raw)
                    echo(
                        f"  {member}: filed (sealed)"
                        if res.ok
                        else f"  {member}: its run failed, filed without a verdict: {res.error}"
                    )
            done = {a.member for a in store.assessments(s.request) if a.phase in ("assessment", "timeout")}
            if len(done) < len(panel.members) and time.time() < s.deadline:
                return store.get(s.request)
            thread = _unseal(app, panel, store, s, artifact.path, transport, echo)
            store.update(s.request, state=SessionState.DISCUSSION, thread=thread)
            s = store.get(s.request)
        if s.state == SessionState.DISCUSSION:
            for round_no in range(1, panel.rounds + 1):
                _discuss(app, panel, store, s, artifact.path, round_no, transport, echo, backend, spent)
            _decide(app, panel, store, s, transport, echo)
            s = store.get(s.request)
        return s


def _assessment_mail(
    app: App,
    panel: PanelConfig,
    member: str,
    artifact: str,
    verdict: str | None,
    findings: str,
    in_reply_to: str | None = None,
    phase: str = "assessment",
) -> bytes:
    v = verdict or "none"
    note = internal_note(
        panel,
        member,
        artifact,
        f"{phase}: {v}",
        findings or "(no findings)",
        in_reply_to,
        (("X-Review-Verdict", v), ("X-Review-Phase", phase)),
    )
    return app.compose(note).raw


def _unseal(
    app: App,
    panel: PanelConfig,
    store: PanelStore,
    s: Session,
    artifact: str,
    transport: Transport,
    echo: Callable[[str], None],
) -> str:
    """Deliver the held assessments into the internal thread (opened by the panel)."""
    store.update(s.request, state=SessionState.UNSEALING)
    opening = NotifyRequest(
        "status-update",
        (artifact,),
        (internal_address(panel.name),),
        panel.name,
        None,
        {
            "STATUS": "assessments unsealed",
            "CONTEXT": f"Every member has filed (or the deadline passed) "
            f"for {artifact}. Assessments follow in this thread; discuss here.",
        },
    )
    c = app.compose(opening)
    c.send(transport)
    for member, _held in store.held(s.request):
        a = next(x for x in store.assessments(s.request, "assessment") if x.member == member)
        raw = _assessment_mail(app, panel, member, artifact, a.verdict, a.findings, c.message_id)
        _send_as_member(app, panel, member, raw, transport)
    echo(f"{panel.name}: unsealed {len(store.held(s.request))} assessment(s) into the internal thread {c.message_id}")
    return c.message_id


def _send_as_member(app: App, panel: PanelConfig, member: str, raw: bytes, transport: Transport) -> None:
    transport.send(raw, app.roster.address(panel.mailbox(member)), (app.roster.address(internal_address(panel.name)),))


def _discuss(
    app: App,
    panel: PanelConfig,
    store: PanelStore,
    s: Session,
    artifact: str,
    round_no: int,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None,
    spent: Spent | None = None,
) -> None:
    phase = f"discussion-{round_no}"
    if store.assessments(s.request, phase):
        return
    prompts = {}
    for m in panel.members:
        boxes, sent = app.roster.view(panel.mailbox(m.name))
        with app.index() as index:
            index.refresh(boxes)
            rows = thread_rows(index, boxes, s.thread or "", sent)
        prompts[m.name] = discussion_prompt(
            app,
            panel,
            m.name,
            artifact,
            render_thread(rows, app.config.mail_root, boxes, domain=app.config.domain),
            round_no,
        )
    results = _run_members(app, panel, prompts, time.time() + panel.deadline, transport, echo, backend, spent)
    for member, res in results.items():
        if res is None or not res.ok:
            continue
        verdict, findings = parse_verdict(res.summary)
        store.file(s.request, member, phase, verdict, findings)
        raw = _assessment_mail(app, panel, member, artifact, verdict, findings, s.thread, phase)
        _send_as_member(app, panel, member, raw, transport)
    echo(f"{panel.name}: discussion round {round_no} done")


def verdicts_of(store: PanelStore, s: Session, panel: PanelConfig) -> dict[str, str | None]:
    """Each member's latest verdict (a discussion turn may change it)."""
    out: dict[str, str | None] = {m.name: None for m in panel.members}
    for a in store.assessments(s.request):
        if a.phase != "timeout" and a.verdict:
            out[a.member] = a.verdict
    return out


def _decide(
    app: App, panel: PanelConfig, store: PanelStore, s: Session, transport: Transport, echo: Callable[[str], None]
) -> None:
    """One unified decision to the requester, a new thread; on approval the artifact moves once."""
    if s.state == SessionState.DECIDED:
        return
    verdicts = verdicts_of(store, s, panel)
    decision, how = consensus(panel.consensus, verdicts)
    latest: dict[str, Assessment] = {}
    for a in store.assessments(s.request):
        latest[a.member] = a
    lines = []
    for m in panel.members:
        last = latest.get(m.name)
        v = verdicts[m.name] or "no verdict"
        dissent = " (dissent)" if (v == "approve") != (decision == "approve") else ""
        lines.append(f"- {m.name}: {v}{dissent}: {(last.findings if last else '').strip()[:1500]}")
    summary = f"Decision: {decision} ({how}).\n\nFindings by member:\n" + "\n".join(lines)
    dissenters = [m.name for m in panel.members if ((verdicts[m.name] or "") == "approve") != (decision == "approve")]
    if dissenters:
        summary += f"\n\nDissent recorded: {', '.join(dissenters)}."
    artifact = s.artifact
    if decision == "approve" and not s.moved:
        req = MoveRequest(artifact, "todo", panel.name, f"panel decision ({how})", notified_by="panel")
        result = move(app, req, transport)
        store.update(s.request, moved=1)
        artifact = result.after.path
    elif decision == "approve":
        now = locate(artifact, app.config)
        artifact = now[0].path if now else artifact
    event = "approval" if decision == "approve" else "rejection"
    variables = {"CONTEXT": summary} if decision == "approve" else {"REASON": summary}
    if decision == "approve":
        variables["NEXT_STATE"] = "todo"
    req2 = NotifyRequest(
        event,
        (artifact,),
        (s.requester,),
        panel.name,
        None,
        variables,
        (("X-Review-Consensus", how.replace("\n", " ")),),
    )
    c = app.compose(req2)
    c.send(transport)
    store.update(s.request, state=SessionState.DECIDED, decision=decision, decision_mid=c.message_id, tally=how)
    echo(f"{panel.name}: {decision} ({how}) sent to {s.requester} as {c.message_id}")


def pending_requests(app: App, panel: PanelConfig) -> list[Row]:
    """Unread review-requests in the panel's member mailboxes, one row per message."""
    with app.index() as index:
        index.refresh(panel.mailboxes)
        rows = index.query(panel.mailboxes, unread=True, event="review-request")
    return [r for r in unique(rows) if r.space is None]


def run_panel(
    app: App,
    panel: PanelConfig,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None = None,
    spent: Spent | None = None,
) -> list[Session]:
    """Every pending review-request of the panel; the members' copies are marked read once decided;
    what the members' runs used is added to ``spent``."""
    out = []
    for r in pending_requests(app, panel):
        s = review(app, panel, r, transport, echo, backend, spent)
        out.append(s)
        if s.state == SessionState.DECIDED:
            with app.index() as index:
                copies = index.query(panel.mailboxes, message_ids=[r.message_id or ""])
            for x in copies:
                app.maildirs.mark_seen(x.mailbox, x.key)
    if not out:
        echo(f"{panel.name}: no pending review-request")
    return out


class PanelStatus(NamedTuple):
    """Where one panel session stands, as ``workflow panel status`` shows it."""

    panel: str
    artifact: str  # where the artifact is now
    request: str
    state: SessionState
    deadline_in: int  # seconds left while sealed
    members: Mapping[str, str]  # member → filed | timed out | pending while sealed; its verdict after
    decision: str | None
    tally: str | None
    decision_mid: str | None
    moved: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "state": str(self.state), "members": dict(self.members)}


def status_rows(app: App, artifact: str | None = None) -> list[PanelStatus]:
    """Where each panel session stands; verdicts only once unsealed."""
    out: list[PanelStatus] = []
    if not app.config.state.panels.exists():
        return out
    with PanelStore(app.config.state.panels) as store:
        for s in store.sessions():
            if artifact and artifact not in s.artifact and artifact != s.request:
                continue
            panel = app.config.panel(s.panel)
            members = [m.name for m in panel.members] if panel else []
            filed = {a.member: a for a in store.assessments(s.request) if a.phase in ("assessment", "timeout")}
            sealed = s.state == SessionState.SEALED
            verdicts = verdicts_of(store, s, panel) if panel else {}
            now = locate(s.artifact, app.config)
            out.append(
                PanelStatus(
                    s.panel,
                    now[0].path if len(now) == 1 else s.artifact,
                    s.request,
                    s.state,
                    max(0, round(s.deadline - time.time())) if sealed else 0,
                    {
                        m: (
                            "filed"
                            if m in filed and filed[m].phase != "timeout"
                            else "timed out"
                            if m in filed
                            else "pending"
                        )
                        if sealed
                        else (verdicts.get(m) or "no verdict")
                        for m in members
                    },
                    s.decision,
                    s.tally,
                    s.decision_mid,
                    s.moved,
                )
            )
    return out


def dumps_status(rows: Sequence[PanelStatus]) -> str:
    if not rows:
        return "no panel sessions yet"
    out = []
    for r in rows:
        head = f"{r.panel}  {r.artifact}  [{r.state}]"
        if r.state == SessionState.SEALED:
            head += f"  deadline in {r.deadline_in}s"
        out.append(head)
        for m, v in r.members.items():
            out.append(f"  {m:<12} {v}")
        if r.decision:
            out.append(f"  decision: {r.decision} ({r.tally}){'; artifact moved' if r.moved else ''}  {r.decision_mid}")
    return "\n".join(out)
