"""CLI: the thin click layer — parse arguments, call the library, turn WorkflowErrors into exits.

Heavy imports (jinja2, the email package) happen inside commands so `workflow inbox` starts fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from workflow.core.errors import WorkflowError


class _Fail(click.ClickException):
    def __init__(self, e: WorkflowError) -> None:
        super().__init__(str(e))
        self.exit_code = e.exit_code  # type: ignore[misc]


class _Errors:
    """Mixin: a WorkflowError anywhere below becomes one 'Error: …' line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WorkflowError as e:
            raise _Fail(e) from None


class Group(_Errors, click.Group):
    pass


class Command(_Errors, click.Command):
    pass


def _app(ctx: click.Context) -> Any:
    from workflow.app import App

    obj = ctx.find_root().obj or {}
    return App.load(obj.get("config"), obj.get("mail_root"))


BACKENDS = ("anthropic", "command", "scripted")  # click choices for --backend (backends.NAMES)
VIAS = ("auto", "smtp", "direct")  # click choices for --via (transport.make_transport)

config_option = click.option(
    "--config", "config_path", type=click.Path(path_type=Path), default=None,
    help="workflow.toml to use (default: the nearest one above the current directory, or $WORKFLOW_CONFIG).",
)
mail_root_option = click.option(
    "--mail-root", type=click.Path(path_type=Path), default=None,
    help="Mail root (default: $WORKFLOW_MAIL_ROOT, then [workflow] mail_root, then ~/.maildir/workflow).",
)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@config_option
@mail_root_option
@click.version_option(package_name="workflow-mail")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, mail_root: Path | None) -> None:
    """workflow-mail: Maildir-native workflow mail for AI agent roles and humans.

    Example:

        workflow demo
    """
    ctx.obj = {"config": config_path, "mail_root": mail_root}


# ------------------------------------------------------------------ notify


def _notify(
    app: Any, event: str, artifact: str, to: str, pairs: tuple[str, ...], sender: str | None,
    in_reply_to: str | None, stdout: bool, via: str,
) -> None:
    from workflow.delivery.notify import NotifyRequest, compose, split_list
    from workflow.mail.templates import parse_vars
    from workflow.delivery.transport import make_transport

    sender = sender or os.environ.get("WORKFLOW_ROLE") or app.config.default_sender
    req = NotifyRequest(
        event=event,
        artifacts=tuple(a for a in artifact.split(",") if a.strip()),
        to=tuple(split_list(to)),
        sender=sender,
        in_reply_to=in_reply_to,
        variables=parse_vars(list(pairs)),
    )
    with app.index() as index:
        composed = compose(req, app.config, app.roster, index)
    if stdout:
        click.echo(composed.raw.decode("utf-8", "replace").replace("\r\n", "\n"), nl=False)
        return
    where = make_transport(app.config, app.deliverer, via).send(composed.raw, composed.sender_address, composed.recipients)
    click.echo(composed.message_id)
    click.echo(f"sent {event} to {', '.join(composed.recipients)} ({where})", err=True)


NOTIFY_HELP = """Send a workflow message: render EVENT's template and deliver it.

TO is one role or several separated by commas (spec-reviewer,test-writer); a panel, a panel
member or a panel address (spec-discussion) works too. KEY=VALUE pairs fill the template
(CONTEXT, QUESTION, BLOCKING, NEXT_STATE, NEXT_ROLES, BLOCKING_DETAILS, NEXT_ACTIONS, REASON…).
An approval with NEXT_ROLES is copied to those roles. The sender is --from, else $WORKFLOW_ROLE,
else [workflow] default_sender ("user"). Prints the new Message-ID.

Example:

    workflow-notify review-request specs/proposed/user-auth.md spec-reviewer CONTEXT="Focus on error handling"

    workflow-notify --in-reply-to "<20251114103000.spec-writer@workflow.local>" clarification-request specs/proposed/user-auth.md spec-writer QUESTION="Expire or refresh?" BLOCKING=no
"""


def _notify_params(f: Any) -> Any:
    for deco in reversed(
        [
            click.option("--in-reply-to", "in_reply_to", metavar="ID", help="Message-ID this replies to (threads it)."),
            click.option("--from", "sender", metavar="ROLE", help="Sending role (default $WORKFLOW_ROLE, then 'user')."),
            click.option("--stdout", is_flag=True, help="Print the message instead of sending it."),
            click.option(
                "--via", type=click.Choice(VIAS), default="auto", show_default=True,
                help="auto: the SMTP server when it answers, else direct delivery.",
            ),
            click.argument("event"),
            click.argument("artifact"),
            click.argument("to"),
            click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]..."),
        ]
    ):
        f = deco(f)
    return f


@cli.command("notify", cls=Command, help=NOTIFY_HELP)
@_notify_params
@click.pass_context
def notify_cmd(ctx: click.Context, /, **kw: Any) -> None:
    _notify(_app(ctx), **kw)


@click.command("workflow-notify", cls=Command, help=NOTIFY_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@config_option
@mail_root_option
@_notify_params
def notify_main_cmd(config_path: Path | None, mail_root: Path | None, **kw: Any) -> None:
    from workflow.app import App

    _notify(App.load(config_path, mail_root), **kw)


def notify_main() -> None:
    _exit_fast(lambda: notify_main_cmd.main(prog_name="workflow-notify"))


# ------------------------------------------------------------------ reading


def _row_json(r: Any) -> dict[str, Any]:
    return {
        "message_id": r.message_id, "mailbox": r.mailbox, "from": r.sender, "to": list(r.recipients),
        "subject": r.subject, "date": r.date, "event": r.event, "state": r.state,
        "artifacts": list(r.artifacts), "in_reply_to": r.in_reply_to, "seen": r.seen,
    }


@cli.command(cls=Command)
@click.argument("role")
@click.option("--event", help="Only this X-Event-Type.")
@click.option("--artifact", "artifact", metavar="GLOB", help="Only mail whose X-Artifacts match (glob or part of a name).")
@click.option("--state", help="Only this X-Workflow-State.")
@click.option("--all", "show_all", is_flag=True, help="Read mail too, not only unread.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def inbox(ctx: click.Context, role: str, event: str | None, artifact: str | None, state: str | None, show_all: bool, as_json: bool) -> None:
    """Show ROLE's unread mail: blockers first, then requests, then decisions, then status; by thread.

    Reading marks nothing.

    Example:

        workflow inbox spec-reviewer --artifact 'specs/*/user-auth.md'
    """
    from workflow.core.locate import Resolver
    from workflow.mail.inbox import group, render_inbox, select

    app = _app(ctx)
    boxes = app.roster.mailboxes_of(role)
    with app.index() as index:
        index.refresh(boxes)
        rows = select(index, boxes, unread=not show_all, event=event, state=state, artifact=artifact,
                      states=app.config.states)
    threads = group(rows)
    where = Resolver(app.config)
    if as_json:
        click.echo(__import__('json').dumps({"role": role, "threads": [
            {"root": t.root, "priority": t.priority,
             "messages": [{**_row_json(m), "artifacts_now": {a: where.now(a) for a in m.artifacts}} for m in t.messages]}
            for t in threads
        ]}, indent=2))
    else:
        click.echo(render_inbox(role, threads, not show_all, where.now), nl=False)


@cli.command(cls=Command)
@click.argument("message_id")
@click.option("--as", "as_role", required=True, metavar="ROLE", help="Show only what ROLE may see.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def thread(ctx: click.Context, message_id: str, as_role: str, as_json: bool) -> None:
    """Print the thread holding MESSAGE_ID as a Markdown transcript, as ROLE sees it.

    Example:

        workflow thread '<20261126031500.a1b2c3d4e5f6.spec-writer@workflow.local>' --as spec-reviewer
    """
    from workflow.core.errors import RosterError
    from workflow.mail.inbox import render_thread, thread_rows
    from workflow.mail.message import normalize_msgid

    app = _app(ctx)
    mid = normalize_msgid(message_id)
    boxes, sent = app.roster.view(as_role)
    with app.index() as index:
        index.refresh()
        rows = thread_rows(index, boxes, mid, sent)
    if not rows:
        raise _Fail(RosterError(f"message {mid} is not in {as_role}'s mailbox"))
    if as_json:
        click.echo(__import__('json').dumps([_row_json(r) for r in rows], indent=2))
    else:
        click.echo(render_thread(rows, app.maildirs, boxes), nl=False)


@cli.command(cls=Command)
@click.argument("text")
@click.option("--as", "as_role", metavar="ROLE", help="Search only what ROLE may see (default: every mailbox).")
@click.option("--limit", default=50, show_default=True, help="Most results to show.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def search(ctx: click.Context, text: str, as_role: str | None, limit: int, as_json: bool) -> None:
    """Full-text search over subjects and bodies (every word must appear), newest first.

    Example:

        workflow search "refresh token" --as spec-writer
    """
    app = _app(ctx)
    boxes, sent = app.roster.view(as_role) if as_role else (None, ())
    with app.index() as index:
        index.refresh()
        rows = index.search(text, boxes, limit, sent)
    if as_json:
        click.echo(__import__('json').dumps([_row_json(r) for r in rows], indent=2))
        return
    for r in rows:
        click.echo(f"{r.mailbox:<28} {r.event or 'mail':<21} {r.subject}\n{'':<28} {r.message_id}")
    click.echo(f"{len(rows)} result{'' if len(rows) == 1 else 's'}", err=True)


@cli.command(cls=Command)
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the index from the Maildirs alone (they are the truth; the index is a cache).

    Also repairs a corrupt or deleted index file.

    Example:

        workflow reindex
    """
    from workflow.mail.index import Index

    app = _app(ctx)
    path = app.config.index_path
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    t0 = time.perf_counter()

    def progress(n: int, total: int) -> None:
        click.echo(f"\rindexed {n}/{total} mailboxes", nl=False, err=True)

    with Index(path, app.maildirs, app.config.domain, rebuild_if_new=False) as index:
        index.rebuild(progress if sys.stderr.isatty() else None)
        count = index.count()
    dt = time.perf_counter() - t0
    click.echo(f"\rindexed {count} messages in {dt:.2f}s ({count / dt if dt else 0:.0f} msg/s) into {path}")


# ------------------------------------------------------------------ roster


@cli.command(cls=Command)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def roster(ctx: click.Context, as_json: bool) -> None:
    """Print every role, panel and address, and the mailboxes each address reaches.

    Example:

        workflow roster
    """
    app = _app(ctx)
    ros = app.roster
    routes = [ros.route(name) for name in ros.known_locals()]
    if as_json:
        click.echo(__import__('json').dumps({
            "domain": ros.domain,
            "roles": [{"name": r.name, "mode": r.mode, "triggers": list(r.triggers), "description": r.description}
                      for r in ros.roles.values()],
            "panels": [{"name": p.name, "kind": p.kind, "members": [m.name for m in p.members],
                        "mailboxes": list(p.mailboxes)} for p in ros.panels.values()],
            "addresses": [{"address": r.address, "kind": r.kind, "mailboxes": list(r.mailboxes)} for r in routes],
        }, indent=2))
        return
    click.echo(f"Roles ({len(ros.roles)}):")
    for r in ros.roles.values():
        trig = ", ".join(r.triggers) or "-"
        click.echo(f"  {r.name:<30} {r.mode:<6} triggers: {trig}")
    click.echo(f"\nPanels ({len(ros.panels)}):")
    for p in ros.panels.values():
        click.echo(f"  {p.name:<30} {p.kind:<8} members: {', '.join(m.name for m in p.members)}")
    click.echo(f"\nAddresses (@{ros.domain}):")
    for r in routes:
        click.echo(f"  {r.address:<48} {r.kind:<10} → {', '.join(r.mailboxes) or '-'}")
    click.echo("\nSync helper roles (*-writing-helper) take no mail. Anything outside the domain is refused"
               " unless an outbound bridge is configured.")


@cli.command(cls=Command)
@click.argument("address")
@click.option("--from", "sender", metavar="ROLE", help="Also say whether ROLE may send to it.")
@click.pass_context
def route(ctx: click.Context, address: str, sender: str | None) -> None:
    """Explain whom ADDRESS reaches and, with --from, whether ROLE may send to it.

    Exits 0 when the mail would be delivered, non-zero with the rule when not.

    Example:

        workflow route spec-reviewer-panel-internal --from spec-writer
    """
    from workflow.core.errors import RosterError, VisibilityError

    app = _app(ctx)
    r = app.roster.route(address)
    click.echo(f"{r.address}: {r.kind}")
    click.echo(f"  {r.explanation}")
    click.echo(f"  mailboxes: {', '.join(r.mailboxes) or '(none)'}")
    if r.kind == "external":
        raise _Fail(RosterError(f"{r.address}: relaying denied: no outbound bridge is configured"))
    if sender:
        who = app.roster.sender(sender)
        ok, why = app.roster.may_send(who, r)
        click.echo(f"  from {who}: {'allowed' if ok else 'refused'} ({why})")
        if not ok:
            raise _Fail(VisibilityError("internal-members-only", why.split(": ", 1)[-1]))


# ------------------------------------------------------------------ server


@cli.command(cls=Command)
@click.option("--host", default=None, help="Address to listen on (default [smtp] host, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default [smtp] port, 8025; 0 picks a free one).")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback address (needs [smtp] auth_users_file).")
@click.option("--hash-password", "hash_pw", is_flag=True, help="Read a password on stdin, print a users-file secret, exit.")
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG.")
@click.pass_context
def smtpd(ctx: click.Context, host: str | None, port: int | None, allow_remote: bool, hash_pw: bool, verbose: bool) -> None:
    """Run the SMTP server: validate and persist workflow mail into the Maildirs.

    Listens on 127.0.0.1:8025 by default; SIGTERM or Ctrl-C stops it after the transactions in
    flight are stored and answered. One log line per message. Refusals name their rule.

    Example:

        workflow smtpd --port 8025
    """
    import logging

    from workflow.delivery.smtpd import check_bind, hash_password, serve

    if hash_pw:
        click.echo(hash_password(sys.stdin.readline().rstrip("\n")))
        return
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = _app(ctx)
    host = host or app.config.smtp.host
    check_bind(host, allow_remote, app.config)

    def ready(bound: int) -> None:
        click.echo(f"workflow smtpd listening on {host}:{bound}, mail root {app.config.mail_root}", err=True)

    stats = serve(app.config, app.deliverer, host, port, ready)
    click.echo(f"stopped: {stats.delivered} delivered, {stats.refused} refused, {stats.failed} failed", err=True)


# ------------------------------------------------------------------ demo


@cli.command(cls=Command)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to create the scratch project (default: a new temporary directory).")
def demo(directory: Path | None) -> None:
    """Run seed 002's Examples 1 and 2 in a scratch project and show every inbox and the thread.

    Needs no API key and no network.

    Example:

        workflow demo --dir /tmp/wf-demo
    """
    from workflow.ops.demo import run_demo

    run_demo(directory, click.echo)


def _exit_fast(run: Any) -> None:
    """Run a click entry point, then leave without interpreter teardown (~20 ms of a short
    command's life): output is flushed and every file and database was closed by its owner."""
    try:
        run()
        code: object = 0
    except SystemExit as e:
        code = e.code
    import logging

    logging.shutdown()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


from workflow.cli import agentd as cli_agentd
from workflow.cli import project as cli_project
from workflow.cli import run as cli_run  # noqa: E402,F401  (register the other commands)


def main() -> None:
    _exit_fast(lambda: cli.main(prog_name="workflow"))


if __name__ == "__main__":
    main()
