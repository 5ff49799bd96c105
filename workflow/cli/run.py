"""CLI run: ``run-role`` (also ``workflow run-role``) — one session of a role, a panel, or a helper."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from workflow.agents.report import RunReport, from_result
from workflow.agents.runrole import Outcome
from workflow.agents.runrole import run_role as run_role_session
from workflow.app import App
from workflow.cli.base import Command, app, backend_option, run_script, standalone, via_option
from workflow.core.config import PanelConfig
from workflow.core.errors import RosterError
from workflow.core.modes import owner_only
from workflow.delivery.transport import Transport, make_transport


def _panel(
    a: App, panel: PanelConfig, transport: Transport, with_email: bool, artifact: str | None, backend: str | None
) -> None:
    """A panel runs its protocol, not one agent: a review panel reviews, a writing panel answers."""
    if not with_email and not artifact:
        raise click.UsageError("nothing to do: give --with-email")
    from workflow.panels.members import Spent  # lazy: a role's run does not pay for the panels
    from workflow.panels.review import run_panel
    from workflow.panels.writing import answer_discussion

    spent = Spent()
    handed: tuple[str, ...] = ()
    if panel.kind == "writing":
        ran = answer_discussion(a, panel, transport, click.echo, backend, spent) > 0
    else:
        sessions = run_panel(a, panel, transport, click.echo, backend, spent)
        ran, handed = bool(sessions), tuple(s.request for s in sessions)
    for line in spent.lines():
        click.echo(f"  {line}")
    report = RunReport(ok=True, ran=ran, handed=handed, usage=spent.total(), members=spent.members)
    report.write_for_scheduler()  # agentd counts the members' tokens and cost against the panel, and each member's


def _outcome(outcome: Outcome) -> None:
    report = from_result(outcome.result, tuple(r.message_id or "" for r in outcome.handed), outcome.busy)
    report.write_for_scheduler()  # what agentd reads back when it spawned this run
    if report.exit_code:
        sys.exit(report.exit_code)


@click.command("run-role", cls=Command)
@click.option("--with-email", is_flag=True, help="Process the role's unread mail.")
@click.option(
    "--email-poll-interval",
    type=float,
    default=None,
    metavar="SECONDS",
    help="During the run, show new mail as it arrives and hand it to the agent.",
)
@click.option("-i", "--interactive", is_flag=True, help="An interactive session in this terminal.")
@backend_option
@click.option("--dry-run", is_flag=True, help="Show the mail and the context; run nothing, mark nothing.")
@click.option(
    "--script",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Script for the scripted backend (default scripted/ROLE.toml).",
)
@click.option(
    "--message",
    "messages",
    multiple=True,
    metavar="MESSAGE-ID",
    help="With --with-email: only this unread message (repeatable); how a bridge's conversation is run.",
)
@via_option
@click.argument("role")
@click.argument("artifact", required=False)
@click.pass_context
def run_role(
    ctx: click.Context,
    with_email: bool,
    email_poll_interval: float | None,
    interactive: bool,
    backend: str | None,
    dry_run: bool,
    script: Path | None,
    messages: tuple[str, ...],
    via: str,
    role: str,
    artifact: str | None,
) -> None:
    """Run ROLE once: read its new mail, build the context, run the agent, send what it decided.

    With --with-email the role processes its unread mail (blockers first, by thread); with ARTIFACT
    it processes that artifact (and the mail about it), then exits. Mail a bridge sent (a person on
    Slack, a correspondent by mail) is run one conversation at a time, by --message: the run's
    finish summary goes back to the bridge as its answer. Messages handed to the agent are
    marked read only when the run succeeds; a failed run leaves them unread for the next one.
    -i starts an interactive terminal session (the only way to run a sync *-writing-helper).
    The backend is --backend, else the role's front matter, else [workflow] backend; there is no
    default: with none of them set the run is refused (nothing is marked or sent).

    \b
    Example:
        run-role --with-email spec-reviewer
        run-role --with-email --message '<abc@workflow.local>' coordinator
        run-role --with-email --backend anthropic --email-poll-interval 10 implementer specs/todo/user-auth.md
        run-role -i spec-writing-helper user-auth
    """
    a = app(ctx)
    transport = make_transport(a.config, a.deliverer, via)
    panel = a.config.panel(role)
    if panel is not None and not interactive:
        _panel(a, panel, transport, with_email, artifact, backend)
        return
    if role not in a.roster.roles:
        a.roster.identity(role)  # unknown: raises with a suggestion
    r = a.roster.roles[role]
    if interactive:
        from workflow.agents.interactive import session  # lazy: a run from mail does not pay for it

        if with_email:
            raise RosterError("-i and --with-email do not mix: an interactive session reads no mail")

        def read(prompt: str) -> str:
            click.echo(prompt, nl=False)
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line

        session(
            a,
            role,
            artifact or click.prompt("Artifact name"),
            transport=transport,
            read=read,
            echo=click.echo,
            backend=backend,
            script=script,
        )
        return
    if not r.takes_mail:
        raise RosterError(
            f"{role} is a sync helper role: it never reads or sends mail (--with-email refused); "
            f"run it interactively: run-role -i {role} NAME"
        )
    if not with_email and not artifact:
        raise click.UsageError("nothing to do: give --with-email, an ARTIFACT, or -i")
    _outcome(
        run_role_session(
            a,
            role,
            transport=transport,
            echo=click.echo,
            backend=backend,
            artifact=artifact,
            dry_run=dry_run,
            poll_interval=email_poll_interval,
            script=script,
            only=messages,
        )
    )


script = standalone(run_role, "run-role")


def main() -> None:
    """The ``run-role`` script."""
    owner_only()  # as ``workflow``: what it, its runs and agents write is the owner's alone
    run_script(script, "run-role")
