"""CLI mail: reading — ``inbox``, ``thread``, ``search`` — and ``reindex``; reading marks nothing."""

from __future__ import annotations

import json
import sys
import time

import click

from workflow.cli.base import Command, app, json_option, one_of
from workflow.core.errors import RosterError
from workflow.core.locate import Resolver
from workflow.mail.inbox import group, render_inbox, render_thread, select, thread_rows
from workflow.mail.index import reset
from workflow.mail.message import normalize_msgid


@click.command(cls=Command)
@click.argument("role")
@click.option("--event", help="Only this X-Event-Type.")
@click.option(
    "--artifact", "artifact", metavar="GLOB", help="Only mail whose X-Artifacts match (glob or part of a name)."
)
@click.option("--state", help="Only this X-Workflow-State.")
@click.option("--all", "show_all", is_flag=True, help="Read mail too, not only unread.")
@json_option
@click.pass_context
def inbox(
    ctx: click.Context,
    role: str,
    event: str | None,
    artifact: str | None,
    state: str | None,
    show_all: bool,
    as_json: bool,
) -> None:
    """Show ROLE's unread mail: blockers first, then requests, then decisions, then status; by thread.

    Reading marks nothing.

    \b
    Example:
        workflow inbox spec-reviewer --artifact 'specs/*/user-auth.md'
    """
    a = app(ctx)
    one_of(event, a.config.event_types, "event type")
    one_of(state, a.config.states, "state")
    boxes = a.roster.mailboxes_of(role)
    with a.index() as index:
        index.refresh(boxes)
        rows = select(
            index, boxes, unread=not show_all, event=event, state=state, artifact=artifact, states=a.config.states
        )
    threads = group(rows)
    where = Resolver(a.config)
    if as_json:
        click.echo(json.dumps({"role": role, "threads": [t.to_dict(where.now) for t in threads]}, indent=2))
    else:
        click.echo(render_inbox(role, threads, not show_all, where.now), nl=False)


@click.command(cls=Command)
@click.argument("message_id")
@click.option("--as", "as_role", required=True, metavar="ROLE", help="Show only what ROLE may see.")
@json_option
@click.pass_context
def thread(ctx: click.Context, message_id: str, as_role: str, as_json: bool) -> None:
    """Print the thread holding MESSAGE_ID as a Markdown transcript, as ROLE sees it.

    \b
    Example:
        workflow thread '<20261126031500.a1b2c3d4e5f6.spec-writer@workflow.local>' --as spec-reviewer
    """
    a = app(ctx)
    mid = normalize_msgid(message_id)
    boxes, sent = a.roster.view(as_role)
    with a.index() as index:
        index.refresh()
        rows = thread_rows(index, boxes, mid, sent)
    if not rows:
        raise RosterError(f"message {mid} is not in {as_role}'s mailbox")
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        click.echo(render_thread(rows, a.maildirs, boxes), nl=False)


@click.command(cls=Command)
@click.argument("text")
@click.option("--as", "as_role", metavar="ROLE", help="Search only what ROLE may see (default: every mailbox).")
@click.option("--limit", default=50, show_default=True, help="Most results to show.")
@json_option
@click.pass_context
def search(ctx: click.Context, text: str, as_role: str | None, limit: int, as_json: bool) -> None:
    """Full-text search over subjects and bodies (every word must appear), newest first.

    \b
    Example:
        workflow search "refresh token" --as spec-writer
    """
    a = app(ctx)
    boxes, sent = a.roster.view(as_role) if as_role else (None, ())
    with a.index() as index:
        index.refresh()
        rows = index.search(text, boxes, limit, sent)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    for r in rows:
        click.echo(f"{r.mailbox:<28} {r.event or 'mail':<21} {r.subject}\n{'':<28} {r.message_id}")
    click.echo(f"{len(rows)} result{'' if len(rows) == 1 else 's'}", err=True)


@click.command(cls=Command)
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the index from the Maildirs alone (they are the truth; the index is a cache).

    Also repairs a corrupt or deleted index file.

    \b
    Example:
        workflow reindex
    """
    a = app(ctx)
    t0 = time.perf_counter()

    def progress(n: int, total: int) -> None:
        click.echo(f"\rindexed {n}/{total} mailboxes", nl=False, err=True)

    count = reset(a.config.index_path, a.maildirs, a.config.domain, progress if sys.stderr.isatty() else None)
    dt = time.perf_counter() - t0
    click.echo(
        f"\rindexed {count} messages in {dt:.2f}s ({count / dt if dt else 0:.0f} msg/s) into {a.config.index_path}"
    )
