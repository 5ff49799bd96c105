"""CLI project: ``init``, ``move``, ``doctor`` and ``trust`` — making a project, moving its artifacts, keeping it sound."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from workflow.artifacts.move import MoveRequest
from workflow.artifacts.move import move as move_artifact
from workflow.artifacts.trust import approve
from workflow.artifacts.trust import changes as control_changes
from workflow.cli import styled
from workflow.cli.base import Command, app, json_option, via_option
from workflow.cli.runs import inside_run
from workflow.core.words import count
from workflow.delivery.notify import split_list
from workflow.delivery.transport import make_transport
from workflow.mail.message import normalize_msgid
from workflow.mail.templates import parse_vars
from workflow.ops.doctor import diagnose, repair
from workflow.ops.scaffold import init as make_project
from workflow.ops.scaffold import next_steps


@click.command(cls=Command)
@click.argument("directory", type=click.Path(path_type=Path), default=".")
@click.option(
    "--root",
    "roots",
    multiple=True,
    metavar="NAME",
    help="An artifact root to create state folders for (repeatable; default: specs).",
)
@click.option("--domain", default="workflow.local", show_default=True, help="Mail domain of the roles.")
@click.option(
    "--mail-root",
    "mail_root",
    default=None,
    help="The new project's mail root (default: ~/.maildir/workflow for the first project, else ~/.maildir/workflow-NAME).",
)
@click.option("--templates", is_flag=True, help="Copy the email templates into email-templates/ to edit them.")
@click.option("--no-hooks", is_flag=True, help="Do not install the git hooks.")
@click.option(
    "--backend", default="", metavar="NAME", help="Every role's agent (default: the first agent CLI on PATH)."
)
@click.option(
    "--human",
    "humans",
    multiple=True,
    metavar="LOGIN=ROLE",
    help="A person's role (repeatable): ROLE is made human; `workflow users add` gives LOGIN its password.",
)
def init(
    directory: Path,
    roots: tuple[str, ...],
    domain: str,
    mail_root: str | None,
    templates: bool,
    no_hooks: bool,
    backend: str,
    humans: tuple[str, ...],
) -> None:
    """Make DIRECTORY (default: here) a workflow project; creates only what is missing.

    Writes workflow.toml, the state folders (proposed/ todo/ doing/ blocked/ done/) of every
    artifact root, roles/, optionally email-templates/; runs git init when needed and installs
    the pre-commit and post-commit hooks. Safe to run again: the second run changes nothing.

    \b
    Example:
        workflow init my-project --root specs --root vision --root roadmap
        workflow init --human bob=spec-reviewer --backend claude-code
    """
    team = []
    for h in humans:
        login, eq, role = h.partition("=")
        if not eq or not login or not role:
            raise click.BadParameter(f"{h!r}: expected LOGIN=ROLE, e.g. bob=spec-reviewer", param_hint="--human")
        team.append((login, role))
    where = directory.resolve()
    steps = make_project(where, roots, domain, mail_root, templates, not no_hooks, backend=backend, humans=team)
    changed = 0
    for s in steps:
        if s.action not in ("exists", "up to date"):
            changed += 1
        click.echo(f"{s.action:>10}  {s.what}")
    click.echo(f"{where}: " + (count(changed, "change") if changed else "already initialized; nothing changed"))
    click.echo("next:")
    for n, step in enumerate(next_steps(where, team), 1):
        click.echo(f"  {n}. {step}")


@click.command(cls=Command)
@click.argument("artifact")
@click.argument("state")
@click.option("--as", "role", required=True, metavar="ROLE", help="The role making the move (named in the commit).")
@click.option("--reason", default="", help="Why; goes into the commit message and the notification.")
@click.option(
    "--notify",
    "notify",
    multiple=True,
    metavar="ROLE",
    help="Send the matching notification to ROLE (repeatable or comma-separated).",
)
@click.option(
    "--event",
    default=None,
    metavar="TYPE",
    help="Notification event (default by transition: approval to todo/, blocker-report to blocked/, "
    "rejection when it stays in proposed/, else status-update).",
)
@click.option("--var", "pairs", multiple=True, metavar="KEY=VALUE", help="More template variables (NEXT_ROLES=…).")
@click.option(
    "--in-reply-to",
    "in_reply_to",
    default=None,
    metavar="MESSAGE-ID",
    help="Thread the notification under this message (default for an approval or rejection: the "
    "latest review-request of the artifact in the mover's mail).",
)
@via_option
@json_option
@click.pass_context
def move(
    ctx: click.Context,
    artifact: str,
    state: str,
    role: str,
    reason: str,
    notify: tuple[str, ...],
    event: str | None,
    pairs: tuple[str, ...],
    in_reply_to: str | None,
    via: str,
    as_json: bool,
) -> None:
    """Move ARTIFACT to STATE with git mv and one commit; with --notify, send the notification too.

    ARTIFACT is a path (specs/proposed/user-auth.md), a glob (specs/*/user-auth.md) or a name
    (user-auth). The move must follow [artifacts] transitions; an illegal one is refused with the
    legal ones listed. Only the artifact is committed: other staged work is left alone. Moving to
    the state it is already in commits nothing (a rejection stays put) but still notifies.

    Inside a run ($WORKFLOW_RUN) the move is the run's: reverted if the run fails, and its
    notification is sent only if the run succeeds; the artifact's uncommitted edits move with it,
    in the move's commit.

    \b
    Example:
        workflow move user-auth todo --as spec-reviewer --reason "Complete and testable" --notify spec-writer --var NEXT_ROLES=skeleton-writer,test-writer
    """
    a = app(ctx)
    if event and not notify:
        raise click.UsageError("--event needs --notify ROLE")
    to = tuple(r for item in notify for r in split_list(item))
    if in_reply_to and not notify:
        raise click.UsageError("--in-reply-to needs --notify ROLE")
    parent = normalize_msgid(in_reply_to) if in_reply_to else None
    req = MoveRequest(artifact, state, role, reason, to, event, parse_vars(list(pairs)), in_reply_to=parent)
    run = inside_run(role)
    result = move_artifact(
        a,
        req,
        make_transport(a.config, a.deliverer, via),
        run.journal if run else None,
        owned=(lambda path: True) if run else None,  # inside a run, its uncommitted edits move with it
    )
    if as_json:
        out = {
            "before": result.before.path,
            "after": result.after.path,
            "commit": result.commit,
            "subject": result.subject,
            "message_id": result.message_id,
            "sent": result.sent or None,
            "queued": str(result.queued) if result.queued else None,
            "error": result.error or None,
        }
        click.echo(json.dumps(out, indent=2))
        if result.queued and "failed" in result.queued.parts:
            sys.exit(6)
        return
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


@click.command(cls=Command)
@click.option("--fix", is_flag=True, help="Repair what is safe: reindex, stale locks, queued mail, hooks.")
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, as_json: bool) -> None:
    """Check the project: artifacts in two folders, mail claims that disagree with git, mail about
    artifacts that are gone, index/Maildir drift, stale locks, unsent notifications, missing hooks.

    One line per problem; exits 1 when any remain. --fix repairs what is safe and says what it did.

    \b
    Example:
        workflow doctor --fix
    """
    a = app(ctx)
    problems = diagnose(a)
    repaired: list[str] = []
    if fix and any(p.fix for p in problems):
        repair(a, problems, repaired.append if as_json else click.echo)
        problems = diagnose(a)
    if as_json:
        found = [{"check": p.check, "text": p.text, "fix": p.fix} for p in problems]
        click.echo(json.dumps({"problems": found, "repaired": repaired}, indent=2))
        if problems:
            sys.exit(1)
        return
    lines = "\n".join(p.line() + (f" [--fix: {p.fix}]" if p.fix and not fix else "") for p in problems)
    if lines and styled.wanted():
        styled.text(lines, "doctor")
    elif lines:
        click.echo(lines)
    if problems:
        click.echo(count(len(problems), "problem"), err=True)
        sys.exit(1)
    click.echo("no problems found")


@click.command(cls=Command)
@click.pass_context
def trust(ctx: click.Context) -> None:
    """Approve the project's control files as they are now: workflow.toml, roles/,
    email-templates/, git's config, hooks/ and info/. `workflow doctor` names every one that
    changes afterwards (a pull, a teammate, a tool) until you have read it and run this again.

    Prints what it approves that differs from the last approval.

    \b
    Example:
        git diff HEAD@{1} -- workflow.toml roles/   # read what changed
        workflow trust
    """
    a = app(ctx)
    before = control_changes(a.config)
    record = approve(a.config)
    if before is None:
        click.echo(f"approved {len(record)} control file(s) as they are (the first approval here)")
        return
    for c in before:
        click.echo(f"  {c}")
    click.echo(f"approved {len(before)} change(s); {len(record)} control file(s) in all")
