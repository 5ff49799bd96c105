"""CLI mail: reading — ``inbox``, ``thread``, ``search`` (they mark nothing), ``read`` (marks what it
prints read, as a mail client) — and ``reindex``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from workflow.cli import fast, reading, styled
from workflow.cli.base import Command, app, json_option, keep_snapshot, one_of, params
from workflow.core.errors import RosterError
from workflow.core.locate import Resolver
from workflow.mail.body import part_text, readable
from workflow.mail.inbox import group, select, thread_rows
from workflow.mail.index import reset
from workflow.mail.message import normalize_msgid, parse
from workflow.mail.rows import Row


@click.command(cls=Command, params=params(fast.INBOX))
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
    where = Resolver(a.config)
    with a.index() as index:
        index.refresh(boxes)
        if as_json:
            rows = select(
                index, boxes, unread=not show_all, event=event, state=state, artifact=artifact, states=a.config.states
            )
            click.echo(json.dumps({"role": role, "threads": [t.to_dict(where.now) for t in group(rows)]}, indent=2))
        else:
            text = reading.inbox_text(
                index,
                boxes,
                role,
                where,
                event=event,
                artifact=artifact,
                state=state,
                show_all=show_all,
                states=a.config.states,
                coloured=styled.wanted(),
                domain=a.config.domain,
            )
            click.echo(text, nl=False)
    keep_snapshot(ctx)


@click.command(cls=Command, params=params(fast.THREAD))
@click.pass_context
def thread(ctx: click.Context, message_id: str, as_role: str, as_json: bool) -> None:
    """Print the thread holding MESSAGE_ID as a Markdown transcript, as ROLE sees it.

    \b
    Example:
        workflow thread '<20261126031500.a1b2c3d4e5f6.spec-writer@workflow.local>' --as spec-reviewer
    """
    a = app(ctx)
    mid = normalize_msgid(message_id)
    view = a.roster.view(as_role)
    with a.index() as index:
        index.refresh()
        if as_json:
            rows = thread_rows(index, view[0], mid, view[1])
            text = json.dumps([r.to_dict() for r in rows], indent=2) + "\n" if rows else None
        else:
            text = reading.thread_text(index, view, mid, str(a.config.mail_root), a.config.domain)
    if text is None:
        raise RosterError(f"message {mid} is not in {as_role}'s mailbox")
    click.echo(text, nl=False)
    keep_snapshot(ctx)


@click.command(cls=Command, params=params(fast.SEARCH))
@click.pass_context
def search(ctx: click.Context, text: str, as_role: str | None, limit: int, as_json: bool) -> None:
    """Full-text search over subjects, bodies (an HTML-only one as its text) and the names and
    addresses of senders and recipients (every word must appear), newest first.

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
    out, count = reading.search_lines(rows)
    click.echo(out, nl=False)
    click.echo(count, nl=False, err=True)
    keep_snapshot(ctx)


@click.command(cls=Command)
@json_option
@click.pass_context
def reindex(ctx: click.Context, as_json: bool) -> None:
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
    if as_json:
        click.echo(json.dumps({"messages": count, "seconds": round(dt, 3), "index": str(a.config.index_path)}))
        return
    click.echo(
        f"\rindexed {count} messages in {dt:.2f}s ({count / dt if dt else 0:.0f} msg/s) into {a.config.index_path}"
    )


@click.command(cls=Command)
@click.argument("message_ids", nargs=-1, metavar="[MESSAGE-ID]...")
@click.option("--as", "as_role", required=True, metavar="ROLE", help="Read ROLE's copies (which are then marked read).")
@click.option("--unread", is_flag=True, help="Every unread message of ROLE, oldest first.")
@click.option("--peek", is_flag=True, help="Leave what is read unread.")
@click.option(
    "--part",
    type=click.IntRange(min=1),
    metavar="N",
    help="Print text attachment N (as numbered under the message) of the one MESSAGE-ID given.",
)
@json_option
@click.pass_context
def read(
    ctx: click.Context,
    message_ids: tuple[str, ...],
    as_role: str,
    unread: bool,
    peek: bool,
    part: int | None,
    as_json: bool,
) -> None:
    """Print messages as ROLE received them — headers and text — and mark them read, as a mail
    client would: for people who read their role's mail without one. An HTML-only message is
    shown as text; attachments are listed by number under the text, and --part N prints a text one.

    \b
    Example:
        workflow read --as user --unread
        workflow read '<20261126031500.a1b2c3d4e5f6.spec-reviewer@workflow.local>' --as spec-writer
        workflow read '<20261126031500.a1b2c3d4e5f6.spec-reviewer@workflow.local>' --as spec-writer --part 2
    """
    if not message_ids and not unread:
        raise click.UsageError("give MESSAGE-IDs, or --unread")
    if part is not None and (unread or len(message_ids) != 1):
        raise click.UsageError("--part N reads an attachment of one message: give exactly one MESSAGE-ID, not --unread")
    a = app(ctx)
    boxes = a.roster.mailboxes_of(as_role)
    wanted = [normalize_msgid(m) for m in message_ids]
    with a.index() as index:
        index.refresh(boxes)
        rows = index.query(boxes, message_ids=wanted) if wanted else index.query(boxes, unread=True)
    for mid in wanted:
        if not any(r.message_id == mid for r in rows):
            raise RosterError(f"message {mid} is not in {as_role}'s mailbox")
    copies: dict[str, list[Row]] = {}
    for r in sorted(rows, key=lambda r: r.date):
        copies.setdefault(r.message_id or f"{r.mailbox}/{r.key}", []).append(r)
    shown: list[dict[str, object]] = []
    heads: list[dict[str, str]] = []
    for mid, same in copies.items():
        entry = a.maildirs.find(same[0].mailbox, same[0].key)
        if entry is None:
            continue
        raw = Path(entry.file).read_bytes()
        p = parse(raw)
        head = {
            k: p.get(k) or ""
            for k in ("From", "To", "Date", "Subject", "Message-ID", "X-Event-Type", "X-Workflow-State", "X-Artifacts")
        }
        heads.append(head)
        if part is not None:
            found, text = part_text(raw, part)  # MessageError names a missing or binary part
            shown.append({"message_id": mid, "part": found.to_dict(), "text": text, "listing": found.line()})
        else:
            body = readable(raw, p)
            listing = body.listing(f"`workflow read {mid} --part N --as {as_role}`")
            attachments = [x.to_dict() for x in body.parts]
            shown.append(
                {"message_id": mid, "headers": head, "text": body.text, "attachments": attachments, "listing": listing}
            )
        if not peek:
            for r in same:
                a.maildirs.mark_seen(r.mailbox, r.key)
    if as_json:
        click.echo(json.dumps([{k: v for k, v in m.items() if k != "listing"} for m in shown], indent=2))
        return
    if not shown:
        click.echo(f"{as_role}: no unread mail")
    for i, (m, head) in enumerate(zip(shown, heads, strict=True)):
        listing = str(m.pop("listing"))
        if part is not None:
            click.echo(f"Attachment {listing} of {m['message_id']}\n")
            click.echo(str(m["text"]).rstrip())
            continue
        if i:
            click.echo("\n" + "-" * 72 + "\n")
        for k, v in head.items():
            if v:
                click.echo(f"{k}: {v}")
        click.echo("")
        click.echo(str(m["text"]).rstrip())
        if listing:
            click.echo("\n" + listing.rstrip())
