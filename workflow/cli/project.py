"""CLI for the project side: init, move, status, doctor and the git hooks (thin over the library)."""

from __future__ import annotations

import json
import time
import sys
import traceback
from pathlib import Path

from typing import Any

import click

from workflow.cli.root import BACKENDS, Command, Group, VIAS, _app, cli
from workflow.core.errors import WorkflowError


@cli.command(cls=Command)
@click.argument("directory", type=click.Path(path_type=Path), default=".")
@click.option("--root", "roots", multiple=True, metavar="NAME",
              help="An artifact root to create state folders for (repeatable; default: specs).")
@click.option("--domain", default="workflow.local", show_default=True, help="Mail domain of the roles.")
@click.option("--mail-root", "mail_root", default=None, help="Mail root to write into a new workflow.toml.")
@click.option("--templates", is_flag=True, help="Copy the email templates into email-templates/ to edit them.")
@click.option("--no-hooks", is_flag=True, help="Do not install the git hooks.")
def init(directory: Path, roots: tuple[str, ...], domain: str, mail_root: str | None, templates: bool, no_hooks: bool) -> None:
    """Make DIRECTORY (default: here) a workflow project; creates only what is missing.

    Writes workflow.toml, the state folders (proposed/ todo/ doing/ blocked/ done/) of every
    artifact root, roles/, optionally email-templates/; runs git init when needed and installs
    the pre-commit and post-commit hooks. Safe to run again: the second run changes nothing.

    Example:

        workflow init my-project --root specs --root vision --root roadmap
    """
    from workflow.ops.scaffold import init as do_init

    steps = do_init(directory.resolve(), roots, domain, mail_root, templates, not no_hooks)
    changed = 0
    for s in steps:
        if s.action not in ("exists", "up to date"):
            changed += 1
        click.echo(f"{s.action:>10}  {s.what}")
    click.echo(f"{directory.resolve()}: " + (f"{changed} change(s)" if changed else "already initialized; nothing changed"))


@cli.command(cls=Command)
@click.argument("artifact")
@click.argument("state")
@click.option("--as", "role", required=True, metavar="ROLE", help="The role making the move (named in the commit).")
@click.option("--reason", default="", help="Why; goes into the commit message and the notification.")
@click.option("--notify", "notify", multiple=True, metavar="ROLE",
              help="Send the matching notification to ROLE (repeatable or comma-separated).")
@click.option("--event", default=None, metavar="TYPE",
              help="Notification event (default by transition: approval to todo/, blocker-report to blocked/, "
                   "rejection when it stays in proposed/, else status-update).")
@click.option("--var", "pairs", multiple=True, metavar="KEY=VALUE", help="More template variables (NEXT_ROLES=…).")
@click.option("--via", type=click.Choice(VIAS), default="auto", show_default=True,
              help="How the notification is sent.")
@click.pass_context
def move(ctx: click.Context, artifact: str, state: str, role: str, reason: str, notify: tuple[str, ...],
         event: str | None, pairs: tuple[str, ...], via: str) -> None:
    """Move ARTIFACT to STATE with git mv and one commit; with --notify, send the notification too.

    ARTIFACT is a path (specs/proposed/user-auth.md), a glob (specs/*/user-auth.md) or a name
    (user-auth). The move must follow [artifacts] transitions; an illegal one is refused with the
    legal ones listed. Only the artifact is committed: other staged work is left alone. Moving to
    the state it is already in commits nothing (a rejection stays put) but still notifies.

    Example:

        workflow move user-auth todo --as spec-reviewer --reason "Complete and testable" --notify spec-writer --var NEXT_ROLES=skeleton-writer,test-writer
    """
    from workflow.artifacts.move import MoveRequest
    from workflow.artifacts.move import move as do_move
    from workflow.delivery.notify import split_list
    from workflow.mail.templates import parse_vars
    from workflow.delivery.transport import make_transport

    app = _app(ctx)
    if event and not notify:
        raise click.UsageError("--event needs --notify ROLE")
    to = tuple(r for item in notify for r in split_list(item))
    req = MoveRequest(artifact, state, role, reason, to, event, parse_vars(list(pairs)))
    result = do_move(app, req, make_transport(app.config, app.deliverer, via))
    if result.commit:
        click.echo(f"moved {result.before.path} → {result.after.path}")
        click.echo(f"committed {result.commit[:10]} {result.subject}")
    else:
        click.echo(f"{result.before.path} stays in {result.before.state}/ (nothing to commit)")
    if result.message_id and not result.queued:
        click.echo(f"sent {result.message_id} ({result.sent})")
    if result.queued:
        click.echo(f"warning: notification not sent: {result.error}", err=True)
        click.echo(f"  kept in {result.queued}; `workflow doctor --fix` or the next commit sends it", err=True)
        if "failed" in result.queued.parts:
            sys.exit(6)


@cli.command(cls=Command)
@click.argument("artifact", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def status(ctx: click.Context, artifact: str | None, as_json: bool) -> None:
    """Show the board: artifacts by state with the last workflow mail about each.

    A card is flagged (!) when the latest X-Workflow-State claim disagrees with the folder or the
    artifact is in two folders. With ARTIFACT, show that artifact's whole mail history.

    Example:

        workflow status

        workflow status user-auth
    """
    from workflow.core.locate import find
    from workflow.artifacts.board import cards, history, render, to_json

    app = _app(ctx)
    only = find(artifact, app.config) if artifact else None
    with app.index() as index:
        index.refresh()
        rows = index.with_artifacts()
    board = cards(app.config, rows, only)
    if as_json:
        click.echo(json.dumps(to_json(app.config, board), indent=2))
    elif only is not None:
        click.echo(history(board[0]))
    else:
        click.echo(render(app.config, board))


@cli.command(cls=Command)
@click.option("--fix", is_flag=True, help="Repair what is safe: reindex, stale locks, queued mail, hooks.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool) -> None:
    """Check the project: artifacts in two folders, mail claims that disagree with git, mail about
    artifacts that are gone, index/Maildir drift, stale locks, unsent notifications, missing hooks.

    One line per problem; exits 1 when any remain. --fix repairs what is safe and says what it did.

    Example:

        workflow doctor --fix
    """
    from workflow.ops.doctor import diagnose, repair

    app = _app(ctx)
    problems = diagnose(app)
    if fix and any(p.fix for p in problems):
        repair(app, problems, click.echo)
        problems = diagnose(app)
    for p in problems:
        click.echo(p.line() + (f" [--fix: {p.fix}]" if p.fix and not fix else ""))
    if problems:
        click.echo(f"{len(problems)} problem(s)", err=True)
        sys.exit(1)
    click.echo("no problems found")


@cli.group(cls=Group)
def hooks() -> None:
    """Git hooks: pre-commit keeps state folders legal, post-commit notifies each move once.

    Example:

        workflow hooks install
    """


@hooks.command("install", cls=Command)
@click.pass_context
def hooks_install(ctx: click.Context) -> None:
    """Install the pre-commit and post-commit hooks (a hook already there is kept and runs first).

    Example:

        workflow hooks install
    """
    from workflow.artifacts.gitrepo import Repo
    from workflow.artifacts.hooks import install

    app = _app(ctx)
    for h in install(app.config, Repo(app.config)):
        click.echo(f"{h.hook}: {h.action} ({h.path})")


@hooks.command("flush", cls=Command)
@click.pass_context
def hooks_flush(ctx: click.Context) -> None:
    """Send the notifications queued while mail could not be sent.

    Example:

        workflow hooks flush
    """
    from workflow.delivery.outbox import flush
    from workflow.delivery.transport import make_transport

    app = _app(ctx)
    sent, left = flush(app.config, make_transport(app.config, app.deliverer), click.echo)
    click.echo(f"sent {sent}, {left} still queued")
    if left:
        sys.exit(1)


@hooks.command("run", cls=Command)
@click.argument("hook", type=click.Choice(["pre-commit", "post-commit"]))
@click.argument("args", nargs=-1)
@click.pass_context
def hooks_run(ctx: click.Context, hook: str, args: tuple[str, ...]) -> None:
    """Run one hook now (git calls this; you rarely need to).

    Example:

        workflow hooks run pre-commit
    """
    from workflow.artifacts.gitrepo import Repo
    from workflow.artifacts.hooks import absolutize_env, post_commit, pre_commit

    def say(text: str) -> None:
        click.echo(f"workflow {hook}: {text}", err=True)

    absolutize_env()
    try:
        app = _app(ctx)
        repo = Repo(app.config)
        if hook == "pre-commit":
            problems = pre_commit(app.config, repo)
            for p in problems:
                say(p)
            if problems:
                say("commit refused (fix the above; `git commit --no-verify` skips this check)")
                sys.exit(1)
            return
        from workflow.delivery.transport import make_transport

        post_commit(app, repo, make_transport(app.config, app.deliverer), say)
    except WorkflowError as e:
        say(f"warning: skipped: {e}")
    except Exception:  # a hook must never lose the user's commit over our bug
        say("warning: internal error, commit kept:\n" + traceback.format_exc())


def _panel(app: Any, name: str) -> Any:
    from workflow.core.errors import RosterError

    p = app.config.panel(name)
    if p is None:
        raise RosterError(f"no panel {name!r}; configured: {', '.join(x.name for x in app.config.panels) or 'none'}")
    return p


@cli.group(cls=Group)
def panel() -> None:
    """Review panels: independent, sealed reviews by several models, one unified decision.

    Example:

        workflow panel status user-auth
    """


@panel.command("review", cls=Command)
@click.argument("name")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Run every member on this backend (default: each member's own).")
@click.option("--via", type=click.Choice(VIAS), default="auto", show_default=True)
@click.pass_context
def panel_review(ctx: click.Context, name: str, backend: str | None, via: str) -> None:
    """Run panel NAME on its pending review-requests: sealed assessments, discussion, consensus, decision.

    Example:

        workflow panel review spec-reviewer-panel
    """
    from workflow.panels.review import run_panel
    from workflow.delivery.transport import make_transport

    app = _app(ctx)
    sessions = run_panel(app, _panel(app, name), make_transport(app.config, app.deliverer, via), click.echo, backend)
    if any(s.state == "sealed" for s in sessions):
        click.echo("some reviews stay sealed until every member files or the deadline passes; run this again then")


@panel.command("status", cls=Command)
@click.argument("artifact", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def panel_status(ctx: click.Context, artifact: str | None, as_json: bool) -> None:
    """Show each panel session: who filed, verdicts once unsealed, the consensus and decision.

    Example:

        workflow panel status user-auth
    """
    from workflow.panels.review import dumps_status, status_rows

    rows = status_rows(_app(ctx), artifact)
    click.echo(json.dumps(rows, indent=2) if as_json else dumps_status(rows))


@panel.command("write", cls=Command)
@click.argument("name")
@click.argument("artifact")
@click.option("--section", "sections", multiple=True, required=True, metavar="TITLE", help="A section, in order (repeatable).")
@click.option("--brief", default="", help="What the artifact is about (given to every member).")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Run every member on this backend (default: each member's own).")
@click.option("--via", type=click.Choice(VIAS), default="auto", show_default=True)
@click.pass_context
def panel_write(ctx: click.Context, name: str, artifact: str, sections: tuple[str, ...], brief: str,
                backend: str | None, via: str) -> None:
    """Writing panel NAME writes ARTIFACT section by section, then sends the review-request.

    Example:

        workflow panel write spec-writer-panel search --section Overview --section Errors --brief "Search specs"
    """
    from workflow.delivery.transport import make_transport
    from workflow.panels.writing import write

    app = _app(ctx)
    write(app, _panel(app, name), artifact, sections, make_transport(app.config, app.deliverer, via), click.echo, backend, brief)


@panel.command("answer", cls=Command)
@click.argument("name")
@click.option("--backend", type=click.Choice(BACKENDS), default=None)
@click.option("--via", type=click.Choice(VIAS), default="auto", show_default=True)
@click.pass_context
def panel_answer(ctx: click.Context, name: str, backend: str | None, via: str) -> None:
    """The primary of writing panel NAME answers the clarifications waiting on the discussion address.

    Example:

        workflow panel answer spec-writer-panel
    """
    from workflow.delivery.transport import make_transport
    from workflow.panels.writing import answer_discussion

    app = _app(ctx)
    n = answer_discussion(app, _panel(app, name), make_transport(app.config, app.deliverer, via), click.echo, backend)
    click.echo(f"{n} answered")


@cli.group(cls=Group)
def bridge() -> None:
    """Bridges to the outside world's mail.

    Example:

        workflow bridge gmail --once
    """


@bridge.command("gmail", cls=Command)
@click.option("--once", is_flag=True, help="One cycle, then exit (default: cycle every poll_interval).")
@click.option("--dry-run", is_flag=True, help="Change nothing on the server and send nothing; say what would happen.")
@click.pass_context
def bridge_gmail(ctx: click.Context, once: bool, dry_run: bool) -> None:
    """Import INBOX into the mapped role, label it (reply_needed, review, todo, summarize), run the
    agents (todo forwarder…), and submit workflow mail addressed outside the domain.

    Configured under [bridges.gmail] (imap_host, user, password_env or xoauth2_command, role…).

    Example:

        workflow bridge gmail --once --dry-run
    """
    import signal

    from workflow.bridges.gmail.bridge import cycle, run, settings

    app = _app(ctx)
    s = settings(app)

    def say(line: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} gmail: {line}", err=True)

    if once:
        for r in cycle(app, s, say, dry_run):
            click.echo(f"{r.agent} uid {r.uid}: {r.status} ({r.info})")
        return
    stopping = {"now": False}

    def stop(signum: int, frame: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    run(app, s, say, lambda: stopping["now"], dry_run)


@bridge.command("respond", cls=Command)
@click.argument("conversation", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--backend", type=click.Choice(BACKENDS), default=None)
@click.pass_context
def bridge_respond(ctx: click.Context, conversation: Path, backend: str | None) -> None:
    """One reply-loop session for CONVERSATION (the bridge spawns this; seed 001's reply Claude).

    Example:

        workflow bridge respond ~/.maildir/workflow/.workflow/conversations/20261126.abc.user_workflow.local
    """
    from workflow.bridges.gmail.replyloop import respond

    out = respond(_app(ctx), conversation, lambda s: click.echo(s, err=True), backend)
    click.echo(str(out) if out else "nothing answered")


@bridge.command("rebuild-thread", cls=Command)
@click.argument("conversation", type=click.Path(path_type=Path, exists=True, file_okay=False))
def bridge_rebuild(conversation: Path) -> None:
    """Rebuild CONVERSATION/thread.md from its numbered reply and response files.

    Example:

        workflow bridge rebuild-thread ~/.maildir/workflow/.workflow/conversations/ID
    """
    from workflow.bridges.gmail.replyloop import rebuild_thread

    click.echo(rebuild_thread(conversation), nl=False)


@bridge.command("slack", cls=Command)
@click.option("--replay", "replay_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Feed recorded event payloads (JSON array or JSON lines) through the same path, run them, exit.")
@click.option("--port", type=int, default=None, help="Listen port (default [bridges.slack] port, 3000; 0 picks one).")
@click.pass_context
def bridge_slack(ctx: click.Context, replay_file: str | None, port: int | None) -> None:
    """The Slack Events API endpoint: verified events become classified tasks, tasks become workflow
    mail run through run-role, results go back to the thread with status reactions.

    Configured under [bridges.slack] (signing_secret_env, bot_token_env, api_base_url, roles…).

    Example:

        workflow bridge slack --replay events.jsonl
    """
    import signal

    from workflow.bridges.slack.bridge import Bridge, replay, serve, settings

    app = _app(ctx)
    s = settings(app)
    if port is not None:
        s = s._replace(port=port)

    def say(line: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} slack: {line}", err=True)

    b = Bridge(app, s, say)
    if replay_file:
        n = replay(b, replay_file)
        click.echo(f"replayed {n} event(s): " + ", ".join(f"{k} {v}" for k, v in sorted(b.store.counts().items())))
        return

    def stop(signum: int, frame: object) -> None:
        b.stopping.set()
        b.wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    serve(b, lambda p: say(f"listening on http://{s.host}:{p}/slack/events"))
