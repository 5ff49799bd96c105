"""Run-role: one session of one role (docs/agentd.md), with mail marked read only on success.

1. check the mailbox: the role's unread mail (with ARTIFACT, only mail about it), by thread;
2. build the context from that mail and the repository (context.build);
3. launch the backend with the role's tools; while it runs, mail that arrives is shown and
   handed to the agent (``poll_interval``);
4. afterwards: on success mark the handed messages seen and send what the run queued; on failure
   leave them unread (the next run retries them) and send nothing;
5. check the mailbox again and show what arrived meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from workflow.agents import asked, locks
from workflow.agents.backends import Backend, RunInput, RunResult, chosen, make_backend
from workflow.agents.backends.login import missing
from workflow.agents.context import build
from workflow.agents.sandbox import status
from workflow.agents.tools import RoleTools
from workflow.agents.txn import Run, RunTransport, recover
from workflow.app import App
from workflow.core.errors import ConfigError, GitError, RosterError
from workflow.core.files import append_untrusted
from workflow.core.locate import Resolver, find
from workflow.core.senders import who
from workflow.delivery import local
from workflow.delivery.transport import Transport
from workflow.mail.inbox import group, render_inbox, render_thread, select
from workflow.mail.rows import Row
from workflow.policy.roles import Role


class Outcome(NamedTuple):
    result: RunResult | None  # None: nothing to do, a dry run, or busy
    handed: tuple[Row, ...]
    sent: tuple[str, ...]
    prompt: str = ""
    busy: str = ""  # another run of this role holds its lock (who and since when)


class Poller:
    """Watches the role's mailboxes during a run; new unread mail is echoed and kept for the agent."""

    def __init__(
        self,
        app: App,
        role: Role,
        known: set[str],
        interval: float,
        echo: Callable[[str], None],
        mail_file: Path | None,
        know: Callable[[Sequence[Row]], None] = lambda rows: None,
    ) -> None:
        self.app, self.role, self.known, self.interval, self.echo = app, role, known, interval, echo
        self.mail_file = mail_file
        self.know = know
        self.pending: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"poll-{role.name}", daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.check()

    def check(self) -> None:
        boxes = self.app.roster.mailboxes_of(self.role.name)
        with self.app.index() as index:
            index.refresh(boxes)
            fresh = [r for r in select(index, boxes) if (r.message_id or r.key) not in self.known]
            texts = []
            for r in fresh:
                self.known.add(r.message_id or r.key)
                texts.append(render_thread([r], self.app.config.mail_root, boxes, domain=self.app.config.domain))
        if fresh:
            self.know(fresh)
        for r, text in zip(fresh, texts, strict=True):
            self.echo(
                f"new mail during the run: {r.event or 'mail'} from {who(r.sender, self.app.config.domain)}: {r.subject}"
            )
            with self.lock:
                self.pending.append(text)
            if self.mail_file is not None and not append_untrusted(self.mail_file, text + "\n\n"):
                # the agent replaced its mail file (a symlink, a FIFO): nothing of ours is written through it
                self.echo(f"not appended to {self.mail_file}: it is no longer a plain file of the run")
                self.mail_file = None

    def drain(self) -> list[str]:
        with self.lock:
            out, self.pending = self.pending, []
        return out

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@contextmanager
def submission_server(app: App, wanted: bool) -> Iterator[str]:
    """The Unix socket of a server a run's agent can submit to: the mail root's ``workflow
    smtpd`` (its runs' socket) when it listens, else one started for this run (its own socket
    beside it, stopped when the run ends). That directory is read-only in the sandbox, and the
    owner's socket is not there at all (``delivery.local``)."""
    if not wanted:
        yield ""
        return
    path = app.config.state.runs_socket
    if local.answers(str(path)):
        yield str(path)
        return
    from workflow.delivery.server.smtpd import BackgroundServer  # lazy: a run beside a live server never loads it

    own = app.config.state.run_socket(os.getpid(), threading.get_native_id())
    with BackgroundServer(app.config, app.deliverer, tcp=False, sockets=[own]):
        yield str(own)


def settled(result: RunResult, tools: RoleTools) -> RunResult:
    """A run's result as its agent's finish decides it: a run succeeds only when the backend did
    and the agent called finish with "done" — an agent that stopped without finishing (a model
    that only talked, a CLI that denied its tools and exited 0) keeps nothing."""
    if not result.ok:
        return result
    if tools.finished is None:
        return result._replace(
            ok=False,
            error='the agent ended without finishing its run: it never called finish(status="done") '
            "(or `workflow finish done` from a shell), so nothing it did is kept",
        )
    status, summary = tools.finished
    if status != "done":
        return result._replace(
            ok=False, summary=summary, error=f"the agent finished its run as failed: {summary[:300]}"
        )
    said = result.summary.strip()
    if summary and summary not in said:  # what the agent printed, then what it said as it finished
        said = f"{said}\n{summary}" if said and said != "done" else summary
    return result._replace(summary=said or "done")


def answered(result: RunResult) -> RunResult:
    """A bridge's run (``agents.asked``) succeeds only with an answer to send."""
    if result.ok and not result.summary.strip():
        return result._replace(ok=False, error="the agent gave no answer")
    return result


def new_mail(app: App, role: Role, artifact: str | None) -> list[Row]:
    boxes = app.roster.mailboxes_of(role.name)
    with app.index() as index:
        index.refresh(boxes)
        return select(index, boxes, artifact=artifact, states=app.config.states)


def run_timeout(app: App, role: str) -> float:
    """How long one run of ``role`` may take ([agentd] timeout, or role_timeouts)."""
    return app.config.agentd.role_timeouts.get(role, app.config.agentd.timeout)


def run_role(
    app: App,
    role_name: str,
    *,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None = None,
    artifact: str | None = None,
    dry_run: bool = False,
    poll_interval: float | None = None,
    script: Path | None = None,
    only: Sequence[str] = (),
    timeout: float | None = None,
    session: str = "",
) -> Outcome:
    """One session; raises only for bad input (unknown role, bad config) or an interrupt, never for
    the agent's failures. With ``only``, the run is handed just those Message-IDs' mail; with
    ``timeout``, the run may take that long instead of the role's run timeout; with ``session``,
    a backend that can resumes that agent session."""
    if role_name not in app.roster.roles:
        app.roster.identity(role_name)  # raises with a suggestion
    role = app.roster.roles[role_name]
    if not role.takes_mail:
        raise RosterError(
            f"{role.name} is a {role.mode} role: it takes no mail; run it interactively with run-role -i {role.name}"
        )
    if artifact:
        artifact = find(artifact, app.config).path
    if not dry_run:  # before the lock: its mail stays unread, nothing starts that could not log in
        refused = missing(chosen(app.config, role.name, role.backend, backend), app.config, os.environ)
        if refused:
            raise ConfigError(f"agent-cli: {refused}")
    if dry_run:
        return _session(
            app,
            role,
            transport,
            echo,
            Opts(backend, artifact, True, poll_interval, script, only, timeout, session),
        )
    lock = app.config.state.lock(role.name)
    held = locks.acquire(lock, app.config.agentd.lock_ttl)
    if held is None:
        info = locks.read(lock)
        who = (
            f"pid {info.pid} on {info.host}, since {time.strftime('%H:%M:%S', time.localtime(info.started))}"
            if info
            else "another run"
        )
        echo(f"{role.name}: already running ({who}); its run takes this mail too")
        return Outcome(None, (), (), busy=who)
    try:
        recover(app, role.name, transport, echo)  # what a crashed run of this role left, finished first
        return _session(
            app,
            role,
            transport,
            echo,
            Opts(backend, artifact, False, poll_interval, script, only, timeout, session),
        )
    finally:
        locks.release(held)


class Opts(NamedTuple):
    """How ``run_role`` was asked to run (its keyword arguments)."""

    backend: str | None
    artifact: str | None
    dry_run: bool
    poll_interval: float | None
    script: Path | None
    only: Sequence[str]
    timeout: float | None
    session: str
    asker: str = ""  # the bridge address whose conversation this run answers (``agents.asked``)


def _session(app: App, role: Role, transport: Transport, echo: Callable[[str], None], o: Opts) -> Outcome:
    resolver = Resolver(app.config)
    # a dry run runs nothing, so it needs no backend: with none chosen, the context a tools backend gets
    previewing = o.dry_run and not (o.backend or role.backend or app.config.backend)
    name = "" if previewing else chosen(app.config, role.name, role.backend, o.backend)
    agent = None if previewing else make_backend(app.config, name, o.script)
    rows = tuple(new_mail(app, role, o.artifact))
    if o.only:
        rows = tuple(r for r in rows if r.message_id in o.only)
        o = o._replace(asker=asked.asker(app, rows))
        if o.asker and not o.session:  # the conversation goes on in the role's session for it
            o = o._replace(session=asked.Sessions(app, role.name).get(o.asker))
    else:
        rows = asked.own_mail(app, rows)  # a bridge's conversations run one by one, by --message
    echo(render_inbox(role.name, group(rows), True, resolver.now, domain=app.config.domain).rstrip())
    if not rows and not o.artifact:
        echo(f"{role.name}: nothing to do")
        return Outcome(None, (), ())
    with app.index() as index:
        ctx = build(app, role, index, rows, o.artifact, how=agent.acts if agent else "tools")
    if o.asker:
        ctx = ctx._replace(prompt=f"{ctx.prompt.rstrip()}\n\n{asked.section(app, o.asker, rows)}")
    if o.dry_run or agent is None:
        chose = f"as {name} gets it" if agent else "no backend chosen: as a backend with tools gets it"
        echo(f"\n--- context (dry run, {chose}; nothing run, marked or sent) ---\n")
        echo(ctx.prompt)
        return Outcome(None, rows, (), ctx.prompt)
    outcome = _transact(app, role, transport, echo, o, rows, ctx.prompt, name, agent)
    res = outcome.result
    if o.asker and o.session and res is not None and res.session_gone:  # its CLI lost it: a new one, same mail
        echo(f"{role.name}: resuming session {o.session} failed ({res.error[:300]}); a new run with the whole exchange")
        o = o._replace(session="")
        outcome = _transact(app, role, transport, echo, o, rows, ctx.prompt, name, agent)
    known = {r.message_id or r.key for r in rows}
    after = [r for r in new_mail(app, role, None) if (r.message_id or r.key) not in known]
    if after:
        echo(
            "\nArrived meanwhile:\n"
            + render_inbox(role.name, group(after), True, resolver.now, domain=app.config.domain).rstrip()
        )
    return outcome


def _transact(
    app: App,
    role: Role,
    transport: Transport,
    echo: Callable[[str], None],
    o: Opts,
    rows: tuple[Row, ...],
    prompt: str,
    name: str,
    agent: Backend,
) -> Outcome:
    """The run itself, as a transaction: the agent works, then its run commits or rolls back."""
    process = agent.acts != "tools"  # an agent CLI: a sandboxed process with a shell
    if o.dry_run:
        echo(prompt)
        return Outcome(None, rows, (), prompt)
    if process:
        sandbox = status(app.config)
        if not sandbox.enforced:
            echo(f"{role.name}: {sandbox.line}")
    run = Run.begin(app.config.state, role.name, rows, app.config, shell=process)
    tools = RoleTools(app, role, RunTransport(app, run), journal=run.intend_move, wrote=run.wrote)
    tools.handed = tuple(r.message_id for r in rows if r.message_id)
    known = {r.message_id or r.key for r in rows}
    mail_file = run.agent / "new-mail.md"
    mail_file.write_text("", encoding="utf-8")
    poller = Poller(app, role, known, o.poll_interval or 0.0, echo, mail_file, run.know)
    full = prompt
    if o.poll_interval and process:
        full += (
            f"\n# Mail during your run\nNew mail that arrives while you work is appended to {mail_file} "
            "($WORKFLOW_NEW_MAIL); look there before you finish.\n"
        )
    limit = o.timeout or run_timeout(app, role.name)
    job = RunInput(
        role,
        full,
        tools,
        rows,
        role.model,
        role.max_turns or 20,
        poller.drain if o.poll_interval else (lambda: []),
        mail_file,
        run_dir=run.dir,
        deadline=time.monotonic() + limit,
        token=run.token,
        session=o.session,
    )
    what = f"{len(rows)} message(s)"
    if o.session:
        what += f", resuming session {o.session}"
    echo(f"\n{role.name}: running the {name} backend on {what}" + (f" and {o.artifact}" if o.artifact else ""))
    t0 = time.monotonic()
    try:
        with submission_server(app, process) as smtp:
            job = job._replace(smtp=smtp)
            if o.poll_interval:
                with poller:
                    result = agent.run(job)
            else:
                result = agent.run(job)
        took = time.monotonic() - t0
        result = settled(result, tools)
        if o.asker:
            result = answered(result)
        if tools.cut_short:  # whatever the agent said: what that call did is half done
            result = result._replace(ok=False, error="; ".join(e for e in (result.error, tools.cut_short) if e))
        if took >= limit:  # the backend stopped at the deadline, or finished past it: either way it timed out
            result = result._replace(
                ok=False, error=f"timed out after {limit:.0f}s ({result.error or 'it finished late'})"
            )
        if result.ok and o.asker:  # the answer goes back to the bridge when, and only if, the run commits
            mid = asked.answer(
                app, role.name, o.asker, rows, result.summary.strip(), result.session, o.session, RunTransport(app, run)
            )
            echo(f"{role.name}: its answer to {o.asker} is {mid}")
    except BaseException as e:  # interrupted (SIGINT, SIGTERM): nothing of the run takes effect
        for line in run.rollback(app, f"interrupted ({type(e).__name__})"):
            echo(f"  {line}")
        echo(f"{role.name}: run interrupted; {len(rows)} message(s) left unread for the next run")
        raise
    moved = [f"moved {m.before.path} → {m.after.path}" for m in run.moves(app.config)]
    sent: list[str] = []
    if result.ok:
        try:
            sent = run.commit_edits(app)
        except GitError as e:
            result = result._replace(ok=False, error=f"its artifact edits could not be committed: {e}")
    if result.ok:
        sent += run.commit(app, transport)
        if o.asker and result.session:
            asked.Sessions(app, role.name).put(o.asker, result.session)
        echo(f"{role.name}: run succeeded in {took:.1f}s")
    else:
        echo(f"{role.name}: run failed after {took:.1f}s: {result.error}")
        dropped = len(run.staged())
        for line in run.rollback(app, result.error[:200]):
            echo(f"  {line}")
        echo(f"  {len(rows)} message(s) left unread for the next run; {dropped} queued message(s) not sent")
    calls = result.calls or tuple(tools.calls)  # an agent CLI's own report, else the calls the tools served
    echo(f"  tool calls ({len(calls)}):" + "".join(f"\n    {c}" for c in calls))
    for line in moved if result.ok else ():
        echo(f"  {line}")
    for line in sent:
        echo(f"  {line}")
    if result.transcript:
        echo(f"  transcript: {result.transcript}")
    if result.usage:
        echo(
            f"  tokens: {result.usage.get('input_tokens', 0)} in, {result.usage.get('output_tokens', 0)} out, "
            f"{result.turns} turn(s)"
        )
    if result.summary.strip():
        echo("  " + result.summary.strip().replace("\n", "\n  "))
    return Outcome(result, rows, tuple(sent), prompt)
