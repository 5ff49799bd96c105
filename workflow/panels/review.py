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
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from workflow.core.errors import WorkflowError

if TYPE_CHECKING:
    from workflow.app import App
    from workflow.agents.backends import RunResult
    from workflow.core.config import Config, PanelConfig
    from workflow.mail.index import Row
    from workflow.delivery.transport import Transport

VERDICTS = ("approve", "reject", "revise")
VERDICT_RE = re.compile(r"^\s*\**\s*VERDICT\s*:\s*\**\s*(approve|reject|revise)\b\**", re.IGNORECASE | re.MULTILINE)
SCHEMA = """
CREATE TABLE IF NOT EXISTS session(request TEXT PRIMARY KEY, panel TEXT NOT NULL, artifact TEXT NOT NULL,
  requester TEXT NOT NULL, opened REAL NOT NULL, deadline REAL NOT NULL, state TEXT NOT NULL,
  thread TEXT, decision TEXT, decision_mid TEXT, tally TEXT, moved INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS assessment(request TEXT NOT NULL, member TEXT NOT NULL, phase TEXT NOT NULL,
  verdict TEXT, findings TEXT NOT NULL, raw BLOB, mid TEXT, filed REAL NOT NULL, PRIMARY KEY(request, member, phase));
"""


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
    state: str  # sealed | discussion | decided
    thread: str | None
    decision: str | None
    decision_mid: str | None
    tally: str | None
    moved: bool


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


class Store:
    """Panel sessions and their (sealed) assessments, in MAIL_ROOT/.workflow/panels.sqlite."""

    def __init__(self, config: Config) -> None:
        path = config.mail_root / ".workflow" / "panels.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, request: str, panel: PanelConfig, artifact: str, requester: str) -> Session:
        now = time.time()
        with self.lock:
            self.db.execute("INSERT OR IGNORE INTO session(request, panel, artifact, requester, opened, deadline, state) "
                            "VALUES (?,?,?,?,?,?, 'sealed')", (request, panel.name, artifact, requester, now, now + panel.deadline))
        return self.get(request)

    def get(self, request: str) -> Session:
        row = self.db.execute("SELECT request, panel, artifact, requester, opened, deadline, state, thread, decision, "
                              "decision_mid, tally, moved FROM session WHERE request=?", (request,)).fetchone()
        if row is None:
            raise WorkflowError(f"no panel session for {request}")
        return Session(str(row[0]), str(row[1]), str(row[2]), str(row[3]), float(row[4]), float(row[5]), str(row[6]),
                       row[7], row[8], row[9], row[10], bool(row[11]))

    def sessions(self) -> list[Session]:
        rows = self.db.execute("SELECT request FROM session ORDER BY opened").fetchall()
        return [self.get(r[0]) for r in rows]

    def update(self, request: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            self.db.execute(f"UPDATE session SET {cols} WHERE request=?", (*fields.values(), request))

    def file(self, request: str, member: str, phase: str, verdict: str | None, findings: str, raw: bytes | None = None) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO assessment(request, member, phase, verdict, findings, raw, filed) "
                            "VALUES (?,?,?,?,?,?,?)", (request, member, phase, verdict, findings, raw, time.time()))

    def assessments(self, request: str, phase: str | None = None) -> list[Assessment]:
        sql = "SELECT member, phase, verdict, findings, filed FROM assessment WHERE request=?"
        args: list[Any] = [request]
        if phase:
            sql += " AND phase=?"
            args.append(phase)
        return [Assessment(*r) for r in self.db.execute(sql + " ORDER BY filed", args)]

    def held(self, request: str) -> list[tuple[str, bytes]]:
        return [(m, bytes(raw)) for m, raw in self.db.execute(
            "SELECT member, raw FROM assessment WHERE request=? AND phase='assessment' AND raw IS NOT NULL ORDER BY filed", (request,))]

    def sealed(self, panel: str) -> list[Session]:
        return [s for s in self.sessions() if s.panel == panel and s.state == "sealed"]


def sealed_for(config: Config, panel: str) -> list[str]:
    """Artifacts under a sealed review by this panel (for the sealed-review guardrail)."""
    path = config.mail_root / ".workflow" / "panels.sqlite"
    if not path.exists():
        return []
    with Store(config) as store:
        return [s.artifact for s in store.sealed(panel)]


def member_prompt(app: App, panel: PanelConfig, member: str, artifact_path: str, request_text: str) -> str:
    """A member's whole context: the reviewer prompt, the artifact, the request — nothing else."""
    role_name = f"{panel.artifact_kind}-reviewer"
    prompt = app.roster.roles[role_name].prompt.strip() if role_name in app.roster.roles else ""
    data = (app.config.project_dir / artifact_path).read_text(encoding="utf-8", errors="replace")
    return (
        f"# Role: {panel.name}.{member}\n\n{prompt}\n\n"
        f"# Independent review\nYou are {member}, one member of {panel.name}. Review on your own: you cannot see the "
        "other members' assessments until everyone has filed. Give concrete findings, then end with one line:\n"
        "VERDICT: approve | reject | revise\n\n"
        f"# The request\n\n{request_text.strip()}\n\n# The artifact: {artifact_path}\n\n````\n{data.rstrip()}\n````\n"
    )


def discussion_prompt(app: App, panel: PanelConfig, member: str, artifact_path: str, thread_text: str, round_no: int) -> str:
    role_name = f"{panel.artifact_kind}-reviewer"
    prompt = app.roster.roles[role_name].prompt.strip() if role_name in app.roster.roles else ""
    data = (app.config.project_dir / artifact_path).read_text(encoding="utf-8", errors="replace")
    return (
        f"# Role: {panel.name}.{member}\n\n{prompt}\n\n# Discussion round {round_no}\nEvery member's assessment is "
        "now visible below. Respond to the others' findings; you may keep or change your verdict. End with one line:\n"
        "VERDICT: approve | reject | revise\n\n"
        f"# The panel's internal thread\n\n{thread_text.strip()}\n\n# The artifact: {artifact_path}\n\n````\n{data.rstrip()}\n````\n"
    )


def _run_members(app: App, panel: PanelConfig, prompts: dict[str, str], deadline: float, transport: Transport,
                 echo: Callable[[str], None], backend: str | None) -> dict[str, RunResult | None]:
    """Each member on its own backend, all at once; a member still running at the deadline gets None."""
    from workflow.agents.backends import RunInput, make_backend
    from workflow.agents.tools import RoleTools

    base_role = app.roster.roles.get(f"{panel.artifact_kind}-reviewer") if f"{panel.artifact_kind}-reviewer" in app.roster.roles else None
    results: dict[str, RunResult | None] = {m: None for m in prompts}

    def one(member: str) -> None:
        spec = next(mm for mm in panel.members if mm.name == member)
        from workflow.policy.roles import Role

        role = (base_role or Role(f"{panel.artifact_kind}-reviewer", "async", "", "", Path("."))
                )._replace(name=panel.mailbox(member), model=spec.model)
        try:
            agent = make_backend(app.config, backend or spec.backend)
            tools = RoleTools(app, role, transport, read_only=True)
            results[member] = agent.run(RunInput(role, prompts[member], tools, (), spec.model))
        except WorkflowError as e:
            from workflow.agents.backends import RunResult as RR

            results[member] = RR(False, "", str(e))

    threads = {m: threading.Thread(target=one, args=(m,), daemon=True, name=f"panel-{m}") for m in prompts}
    for t in threads.values():
        t.start()
    for m, t in threads.items():
        t.join(max(0.0, deadline - time.time()))
        if t.is_alive():
            echo(f"  {m}: no assessment by the deadline")
    return {m: (results[m] if not threads[m].is_alive() else None) for m in prompts}


def review(app: App, panel: PanelConfig, request: Row, transport: Transport, echo: Callable[[str], None],
           backend: str | None = None) -> Session:
    """Run (or resume) the panel session for one review-request, through to the unified decision."""
    from workflow.core.locate import locate

    if panel.kind != "review":
        raise WorkflowError(f"{panel.name} is a {panel.kind} panel; only review panels review")
    if not request.artifacts:
        raise WorkflowError(f"review-request {request.message_id} names no artifact")
    found = locate(request.artifacts[0], app.config)
    if len(found) != 1:
        raise WorkflowError(f"review-request {request.message_id}: artifact {request.artifacts[0]} "
                            f"{'not found' if not found else 'is in several state folders'}")
    artifact = found[0]
    requester = app.roster.sender(request.sender)
    with Store(app.config) as store:
        s = store.open(request.message_id or "", panel, artifact.path, requester)
        if s.state == "sealed":
            echo(f"{panel.name}: independent review of {artifact.path} by {', '.join(m.name for m in panel.members)} (sealed)")
            entry = app.maildirs.find(request.mailbox, request.key)
            text = ""
            if entry is not None:
                from workflow.mail.message import body_text, parse

                raw = entry.path.read_bytes()
                text = f"From: {request.sender}\nSubject: {request.subject}\n\n{body_text(raw, parse(raw))}"
            filed = {a.member for a in store.assessments(s.request, "assessment")}
            todo = {m.name: member_prompt(app, panel, m.name, artifact.path, text) for m in panel.members if m.name not in filed}
            if todo:
                results = _run_members(app, panel, todo, s.deadline, transport, echo, backend)
                for member, res in results.items():
                    if res is None:
                        store.file(s.request, member, "timeout", None, "no assessment by the deadline")
                        continue
                    verdict, findings = parse_verdict(res.summary if res.ok else "")
                    if not res.ok:
                        findings = f"(the member's run failed: {res.error})"
                    raw = _assessment_mail(app, panel, member, artifact.path, verdict, findings)
                    store.file(s.request, member, "assessment", verdict, findings, raw)
                    echo(f"  {member}: filed (sealed)")
            done = {a.member for a in store.assessments(s.request) if a.phase in ("assessment", "timeout")}
            if len(done) < len(panel.members) and time.time() < s.deadline:
                return store.get(s.request)
            thread = _unseal(app, panel, store, s, artifact.path, transport, echo)
            store.update(s.request, state="discussion", thread=thread)
            s = store.get(s.request)
        if s.state == "discussion":
            for round_no in range(1, panel.rounds + 1):
                _discuss(app, panel, store, s, artifact.path, round_no, transport, echo, backend)
            _decide(app, panel, store, s, transport, echo)
            s = store.get(s.request)
        return s


def _assessment_mail(app: App, panel: PanelConfig, member: str, artifact: str, verdict: str | None,
                     findings: str, in_reply_to: str | None = None, phase: str = "assessment") -> bytes:
    from workflow.delivery.notify import NotifyRequest, compose

    v = verdict or "none"
    req = NotifyRequest("status-update", (artifact,), (panel.internal_address,), panel.mailbox(member), in_reply_to,
                        {"STATUS": f"{phase}: {v}", "CONTEXT": findings[:20000] or "(no findings)"},
                        (("X-Review-Verdict", v), ("X-Review-Phase", phase)))
    with app.index() as index:
        return compose(req, app.config, app.roster, index).raw


def _unseal(app: App, panel: PanelConfig, store: Store, s: Session, artifact: str, transport: Transport,
            echo: Callable[[str], None]) -> str:
    """Deliver the held assessments into the internal thread (opened by the panel)."""
    from workflow.delivery.notify import NotifyRequest, compose

    store.update(s.request, state="unsealing")
    opening = NotifyRequest("status-update", (artifact,), (panel.internal_address,), panel.name, None,
                            {"STATUS": "assessments unsealed", "CONTEXT": f"Every member has filed (or the deadline passed) "
                             f"for {artifact}. Assessments follow in this thread; discuss here."})
    with app.index() as index:
        c = compose(opening, app.config, app.roster, index)
    transport.send(c.raw, c.sender_address, c.recipients)
    for member, _held in store.held(s.request):
        a = next(x for x in store.assessments(s.request, "assessment") if x.member == member)
        raw = _assessment_mail(app, panel, member, artifact, a.verdict, a.findings, c.message_id)
        transport.send(raw, app.roster.address(panel.mailbox(member)), (app.roster.address(panel.internal_address),))
    echo(f"{panel.name}: unsealed {len(store.held(s.request))} assessment(s) into the internal thread {c.message_id}")
    return c.message_id


def _discuss(app: App, panel: PanelConfig, store: Store, s: Session, artifact: str, round_no: int,
             transport: Transport, echo: Callable[[str], None], backend: str | None) -> None:
    from workflow.mail.inbox import render_thread, thread_rows

    phase = f"discussion-{round_no}"
    if store.assessments(s.request, phase):
        return
    prompts = {}
    for m in panel.members:
        boxes, sent = app.roster.view(panel.mailbox(m.name))
        with app.index() as index:
            index.refresh(boxes)
            rows = thread_rows(index, boxes, s.thread or "", sent)
        prompts[m.name] = discussion_prompt(app, panel, m.name, artifact, render_thread(rows, app.maildirs, boxes), round_no)
    results = _run_members(app, panel, prompts, time.time() + panel.deadline, transport, echo, backend)
    for member, res in results.items():
        if res is None or not res.ok:
            continue
        verdict, findings = parse_verdict(res.summary)
        store.file(s.request, member, phase, verdict, findings)
        raw = _assessment_mail(app, panel, member, artifact, verdict, findings, s.thread, phase)
        transport.send(raw, app.roster.address(panel.mailbox(member)), (app.roster.address(panel.internal_address),))
    echo(f"{panel.name}: discussion round {round_no} done")


def verdicts_of(store: Store, s: Session, panel: PanelConfig) -> dict[str, str | None]:
    """Each member's latest verdict (a discussion turn may change it)."""
    out: dict[str, str | None] = {m.name: None for m in panel.members}
    for a in store.assessments(s.request):
        if a.phase != "timeout" and a.verdict:
            out[a.member] = a.verdict
    return out


def _decide(app: App, panel: PanelConfig, store: Store, s: Session, transport: Transport, echo: Callable[[str], None]) -> None:
    """One unified decision to the requester, a new thread; on approval the artifact moves once."""
    from workflow.artifacts.move import MoveRequest, move
    from workflow.delivery.notify import NotifyRequest, compose

    if s.state == "decided":
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
        from workflow.core.locate import locate

        now = locate(artifact, app.config)
        artifact = now[0].path if now else artifact
    event = "approval" if decision == "approve" else "rejection"
    variables = {"CONTEXT": summary} if decision == "approve" else {"REASON": summary}
    if decision == "approve":
        variables["NEXT_STATE"] = "todo"
    req2 = NotifyRequest(event, (artifact,), (s.requester,), panel.name, None, variables,
                         (("X-Review-Consensus", how.replace("\n", " ")),))
    with app.index() as index:
        c = compose(req2, app.config, app.roster, index)
    transport.send(c.raw, c.sender_address, c.recipients)
    store.update(s.request, state="decided", decision=decision, decision_mid=c.message_id, tally=how)
    echo(f"{panel.name}: {decision} ({how}) sent to {s.requester} as {c.message_id}")


def pending_requests(app: App, panel: PanelConfig) -> list[Row]:
    """Unread review-requests in the panel's member mailboxes, one row per message."""
    from workflow.mail.inbox import unique

    with app.index() as index:
        index.refresh(panel.mailboxes)
        rows = index.query(panel.mailboxes, unread=True, event="review-request")
    return [r for r in unique(rows) if r.space is None]


def run_panel(app: App, panel: PanelConfig, transport: Transport, echo: Callable[[str], None],
              backend: str | None = None) -> list[Session]:
    """Every pending review-request of the panel; the members' copies are marked read once decided."""
    out = []
    for r in pending_requests(app, panel):
        s = review(app, panel, r, transport, echo, backend)
        out.append(s)
        if s.state == "decided":
            with app.index() as index:
                copies = [x for x in index.query(panel.mailboxes, message_ids=[r.message_id or ""])]
            for x in copies:
                e = app.maildirs.find(x.mailbox, x.key)
                if e is not None and "S" not in e.flags:
                    app.maildirs.set_flags(e, e.flags + "S")
    if not out:
        echo(f"{panel.name}: no pending review-request")
    return out


def status_rows(app: App, artifact: str | None = None) -> list[dict[str, Any]]:
    """Where each panel session stands; verdicts only once unsealed."""
    out: list[dict[str, Any]] = []
    path = app.config.mail_root / ".workflow" / "panels.sqlite"
    if not path.exists():
        return out
    with Store(app.config) as store:
        for s in store.sessions():
            if artifact and artifact not in s.artifact and artifact != s.request:
                continue
            panel = app.config.panel(s.panel)
            members = [m.name for m in panel.members] if panel else []
            filed = {a.member: a for a in store.assessments(s.request) if a.phase in ("assessment", "timeout")}
            sealed = s.state == "sealed"
            verdicts = verdicts_of(store, s, panel) if panel else {}
            from workflow.core.locate import locate

            now = locate(s.artifact, app.config)
            out.append({
                "panel": s.panel, "artifact": now[0].path if len(now) == 1 else s.artifact, "request": s.request, "state": s.state,
                "deadline_in": max(0, round(s.deadline - time.time())) if sealed else 0,
                "members": {m: ("filed" if m in filed and filed[m].phase != "timeout" else "timed out" if m in filed else "pending")
                            if sealed else (verdicts.get(m) or "no verdict") for m in members},
                "decision": s.decision, "tally": s.tally, "decision_mid": s.decision_mid, "moved": s.moved,
            })
    return out


def dumps_status(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no panel sessions yet"
    out = []
    for r in rows:
        head = f"{r['panel']}  {r['artifact']}  [{r['state']}]"
        if r["state"] == "sealed":
            head += f"  deadline in {r['deadline_in']}s"
        out.append(head)
        for m, v in r["members"].items():
            out.append(f"  {m:<12} {v}")
        if r["decision"]:
            out.append(f"  decision: {r['decision']} ({r['tally']}){'; artifact moved' if r['moved'] else ''}  {r['decision_mid']}")
    return "\n".join(out)
