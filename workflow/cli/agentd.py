"""CLI agentd: ``agentd run|status|resume|requeue`` (also ``workflow agentd …``) and ``workflow up``."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import click

from workflow.agentd.daemon import Agentd
from workflow.agentd.status import DaemonStatus
from workflow.agentd.status import status as daemon_status
from workflow.agentd.tasks import Tasks
from workflow.agents.clicheck import refuse
from workflow.agents.sandbox import status as sandbox_status
from workflow.app import App
from workflow.artifacts.board import age
from workflow.cli.base import Command, Group, app, backend_option, json_option, run_script, standalone
from workflow.core import lifeline
from workflow.core.modes import owner_only
from workflow.delivery.address import in_use

STOP_WAIT = 30.0  # seconds `workflow up` waits for smtpd and the cockpit to stop, then kills them


def stop_handler(daemon: Agentd) -> Callable[[int, object], None]:
    """SIGTERM/SIGINT for agentd. A handler runs in the main thread, which may be inside
    ``Event.wait`` holding that event's lock; setting the event there would wait for itself
    forever. So the stop is requested from a thread of its own."""

    def request() -> None:
        if daemon.stop.is_set():
            click.echo("stopping now: killing the runs (their mail stays unread and is tried again later)", err=True)
        daemon.request_stop()

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=request, name="agentd-stop", daemon=True).start()

    return handler


def run_daemon(a: App, backend: str | None, rescan: float | None) -> None:
    """agentd in the foreground until SIGTERM or SIGINT."""
    opts = a.config.agentd
    if backend:
        opts = opts._replace(backend=backend)
    if rescan is not None:
        opts = opts._replace(rescan=rescan)
    daemon = Agentd(a, opts, lambda line: click.echo(line, err=True))

    signal.signal(signal.SIGTERM, stop_handler(daemon))
    signal.signal(signal.SIGINT, stop_handler(daemon))
    daemon.run()


@click.group(cls=Group)
def agentd() -> None:
    """The background daemon: wakes a role when its trigger mail arrives.

    \b
    Example:
        agentd run
        agentd status
    """


@agentd.command("run", cls=Command)
@backend_option
@click.option(
    "--rescan", type=float, default=None, help="Seconds between safety rescans (default [agentd] rescan, 30)."
)
@click.pass_context
def run(ctx: click.Context, backend: str | None, rescan: float | None) -> None:
    """Run in the foreground (for systemd or tmux); SIGTERM stops it cleanly.

    \b
    Example:
        agentd run --rescan 30
    """
    a = app(ctx)
    refuse(a.config, a.roster, os.environ, backend)  # before the first run: doctor's line, not a run's failure
    run_daemon(a, backend, rescan)


@agentd.command("status", cls=Command)
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show whether agentd runs (pid, since when), the queue, running roles (pid, age), paused roles
    and why, oldest unread mail, failures. Exits 3 when no agentd runs for this mail root.

    \b
    Example:
        agentd status
    """
    a = app(ctx)
    s = daemon_status(a)
    now = time.time()
    sandbox = sandbox_status(a.config)
    if as_json:
        click.echo(json.dumps({**s.to_dict(), "sandboxed": sandbox.enforced, "sandbox": sandbox.line}, indent=2))
    else:
        _print_status(s, now)
        click.echo(f"sandbox: {sandbox.line}")
    if s.daemon is None:
        sys.exit(3)


def _for(kind: str, ref: str) -> str:
    """What asked for a run, when a bridge did."""
    return "" if kind == "mail" else f"  ({kind} {ref})"


def _print_status(s: DaemonStatus, now: float) -> None:
    if s.daemon is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.daemon.since))
        click.echo(f"agentd: running (pid {s.daemon.pid} on {s.daemon.host}, since {since})")
    else:
        click.echo("agentd: not running (start it with `agentd run` or `workflow up`)")
    click.echo(f"running ({len(s.running)}):")
    for r in s.running:
        click.echo(
            f"  task {r.task:<5} {r.role:<24} pid {r.pid}  running for {age(int(now - r.age), now).replace(' ago', '')}"
            + _for(r.kind, r.ref)
        )
    click.echo(f"queued ({len(s.queued)}):")
    for q in s.queued:
        due = f" in {q.due_in}s" if q.due_in else ""
        click.echo(
            f"  task {q.task:<5} {q.role:<24} {q.messages} message(s){due}"
            + (f"  last error: {q.error}" if q.error else "")
        )
    click.echo(f"paused ({len(s.paused)}):")
    for role, why in s.paused.items():
        click.echo(f"  {role:<24} {why}   (agentd resume {role})")
    click.echo("oldest unread mail:")
    for role, secs in s.oldest_unread.items():
        click.echo(f"  {role:<24} {age(int(now - secs), now)}")
    click.echo("recent failures:")
    for f in s.recent_failures:
        gave_up = "dead-lettered " if f.dead and f.kind == "mail" else ""
        click.echo(f"  task {f.task:<5} {f.role:<24} {gave_up}{f.error}{_for(f.kind, f.ref)}")
    if s.recent:
        click.echo("recent runs:")
        for d in s.recent:
            click.echo(f"  task {d.task:<5} {d.role:<24} completed {age(int(now - d.ago), now)}{_for(d.kind, d.ref)}")
            if d.log:
                click.echo(f"    log: {d.log}")
            if d.transcript:
                click.echo(f"    transcript: {d.transcript}")
    if s.stopped_threads:
        click.echo("threads stopped by loop detection:")
        for root, why in s.stopped_threads.items():
            click.echo(f"  {root}  {why}")
    if s.tokens_today:
        click.echo("tokens today: " + ", ".join(f"{r} {n}" for r, n in s.tokens_today.items()))
    if s.cost_today:
        click.echo("cost today: " + ", ".join(f"{r} ${c:.4f}" for r, c in s.cost_today.items()))
    for panel, members in s.members_today.items():  # a panel's usage above, member by member
        click.echo(
            f"panel {panel} today: "
            + ", ".join(f"{m} {t} tokens" + (f" ${c:.4f}" if c else "") for m, (t, c) in members.items())
        )


@agentd.command("resume", cls=Command)
@click.argument("role")
@click.pass_context
def resume(ctx: click.Context, role: str) -> None:
    """Un-pause ROLE (after failures or an exhausted budget).

    \b
    Example:
        agentd resume implementer
    """
    a = app(ctx)
    a.roster.identity(role)
    with Tasks(a.config.state.tasks) as tasks:
        was = tasks.resume(role)
    click.echo(f"{role}: resumed" + (f" (was paused: {was})" if was else " (was not paused)"))


@agentd.command("requeue", cls=Command)
@click.argument("task", type=int)
@click.pass_context
def requeue(ctx: click.Context, task: int) -> None:
    """Queue TASK again now (a failed or dead-lettered one).

    \b
    Example:
        agentd requeue 42
    """
    with Tasks(app(ctx).config.state.tasks) as tasks:
        t = tasks.requeue(task)
    click.echo(f"task {t.id} ({t.role}) queued")


@click.command(cls=Command)
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="SMTP port (default [smtp] port).")
@click.option("--web", "with_web", is_flag=True, help="Serve the browser cockpit too (workflow web, [web] port).")
@backend_option
@click.pass_context
def up(ctx: click.Context, port: int | None, with_web: bool, backend: str | None) -> None:
    """Run the SMTP server and agentd together in the foreground (local use); Ctrl-C stops both.

    With --web, the browser cockpit too (`workflow web`), on [web] host and port.

    \b
    Example:
        workflow up
        workflow up --web
    """
    a = app(ctx)
    cfg = a.config
    refuse(cfg, a.roster, os.environ, backend)  # before anything starts: doctor's line, not each run's failure
    free(cfg.smtp.host, cfg.smtp.port if port is None else port)  # in use: one line, before anything starts
    argv = (
        [sys.executable, "-P", "-m", "workflow"]  # -P: the project never shadows the package
        + (["--config", str(cfg.path)] if cfg.path else [])
        + ["--mail-root", str(cfg.mail_root), "smtpd"]
        + (["--port", str(port)] if port is not None else [])
    )
    if with_web:
        free(cfg.web.host, cfg.web.port)
    env = {**os.environ, lifeline.ENV: str(os.getpid())}  # a child goes when `up` goes, however it goes
    names = ["smtpd", "web"] if with_web else ["smtpd"]
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:  # from before the first child starts: an interrupt at any instant stops what started
        for name in names:
            command = argv if name == "smtpd" else [*argv[: argv.index("smtpd")], "web"]
            children.append((name, subprocess.Popen(command, cwd=cfg.project_dir, env=env)))
        smtp = (cfg.smtp.host, cfg.smtp.port if port is None else port)
        for (name, child), where in zip(children, [smtp, (cfg.web.host, cfg.web.port)], strict=False):
            listening(name, child, *where)
        click.echo(f"workflow up: {' and '.join(names)} listening; agentd starting (Ctrl-C stops them all)", err=True)
        run_daemon(a, backend, None)
    finally:
        stop_children(children)


def listening(name: str, child: subprocess.Popen[bytes], host: str, port: int, within: float = 30.0) -> None:
    """Wait until ``child`` accepts connections on ``host:port`` (agentd's first run may mail at
    once); refuse, naming it, a child that exited or never listened. Port 0 (the system picks one)
    cannot be asked: a short grace then."""
    end = time.monotonic() + (0.3 if port == 0 else within)
    while time.monotonic() < end:
        if child.poll() is not None:
            raise click.ClickException(f"workflow {name} exited with status {child.returncode}")
        if port:
            try:
                socket.create_connection((host, port), timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.05)
    if port:
        raise click.ClickException(f"workflow {name} did not listen on {host}:{port} within {within:.0f} s")


def stop_children(children: list[tuple[str, subprocess.Popen[bytes]]], grace: float = STOP_WAIT) -> None:
    """SIGTERM each child, saying what is waited for and for how long; SIGKILL what is left after ``grace``."""
    for _, child in children:
        if child.poll() is None:
            child.terminate()
    alive = [name for name, child in children if child.poll() is None]
    if alive:
        click.echo(
            f"waiting up to {grace:.0f} s for {' and '.join(alive)} to stop (mail in flight is stored first)", err=True
        )
    end = time.monotonic() + grace
    for name, child in children:
        try:
            child.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            click.echo(f"{name} did not stop in {grace:.0f} s: killed", err=True)
            child.kill()
            child.wait()


def free(host: str, port: int) -> None:
    """Refuse, in one line naming what holds it, a port we could not listen on."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise in_use(host, port) from None


script = standalone(agentd, "agentd")


def main() -> None:
    """The ``agentd`` script."""
    owner_only()  # as ``workflow``: what it, its runs and agents write is the owner's alone
    run_script(script, "agentd")
