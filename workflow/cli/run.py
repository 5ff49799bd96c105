"""CLI for role sessions: ``run-role`` (also ``workflow run-role``), thin over runrole and interactive."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from workflow.cli.root import BACKENDS, Command, VIAS, _app, _exit_fast, cli, config_option, mail_root_option

RUN_ROLE_HELP = """Run ROLE once: read its new mail, build the context, run the agent, send what it decided.

With --with-email the role processes its unread mail (blockers first, by thread); with ARTIFACT
it processes that artifact (and the mail about it), then exits. Messages handed to the agent are
marked read only when the run succeeds; a failed run leaves them unread for the next one.
-i starts an interactive terminal session (the only way to run a sync *-writing-helper).
The backend is --backend, else the role's front matter, else scripted.

Example:

    run-role --with-email spec-reviewer

    run-role --with-email --backend anthropic --email-poll-interval 10 implementer specs/todo/user-auth.md

    run-role -i spec-writing-helper user-auth
"""


def _run_params(f: Any) -> Any:
    for deco in reversed([
        click.option("--with-email", is_flag=True, help="Process the role's unread mail."),
        click.option("--email-poll-interval", type=float, default=None, metavar="SECONDS",
                     help="During the run, show new mail as it arrives and hand it to the agent."),
        click.option("-i", "--interactive", is_flag=True, help="An interactive session in this terminal."),
        click.option("--backend", type=click.Choice(BACKENDS), default=None,
                     help="Agent backend (default: the role's front matter)."),
        click.option("--dry-run", is_flag=True, help="Show the mail and the context; run nothing, mark nothing."),
        click.option("--script", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Script for the scripted backend (default scripted/ROLE.toml)."),
        click.option("--via", type=click.Choice(VIAS), default="auto", show_default=True,
                     help="How the run's messages are sent."),
        click.argument("role"),
        click.argument("artifact", required=False),
    ]):
        f = deco(f)
    return f


def _run(app: Any, role: str, artifact: str | None, with_email: bool, email_poll_interval: float | None,
         interactive: bool, backend: str | None, dry_run: bool, script: Path | None, via: str) -> None:
    from workflow.core.errors import RosterError
    from workflow.delivery.transport import make_transport

    transport = make_transport(app.config, app.deliverer, via)
    panel = app.config.panel(role)
    if panel is not None and not interactive:  # a review panel runs its protocol, not one agent
        from workflow.panels.review import run_panel

        if not with_email and not artifact:
            raise click.UsageError("nothing to do: give --with-email")
        if panel.kind == "writing":
            from workflow.panels.writing import answer_discussion

            answer_discussion(app, panel, transport, click.echo, backend)
            return
        sessions = run_panel(app, panel, transport, click.echo, backend)
        result_file = os.environ.get("WORKFLOW_RESULT_FILE")
        if result_file:
            Path(result_file).write_text(json.dumps({"ok": True, "ran": bool(sessions), "busy": "", "error": "",
                                                     "usage": {}, "turns": 0, "handed": [s.request for s in sessions]}))
        return
    known = role in app.roster.roles
    if not known:
        app.roster.sender(role)  # unknown: raises with a suggestion
    r = app.roster.roles[role]
    if interactive:
        if with_email:
            raise RosterError("-i and --with-email do not mix: an interactive session reads no mail")
        from workflow.agents.interactive import session

        def read(prompt: str) -> str:
            click.echo(prompt, nl=False)
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line

        session(app, role, artifact or click.prompt("Artifact name"), transport=transport, read=read,
                echo=click.echo, backend=backend, script=script)
        return
    if not r.takes_mail:
        raise RosterError(f"{role} is a sync helper role: it never reads or sends mail (--with-email refused); "
                          f"run it interactively: run-role -i {role} NAME")
    if not with_email and not artifact:
        raise click.UsageError("nothing to do: give --with-email, an ARTIFACT, or -i")
    from workflow.agents.runrole import run_role

    outcome = run_role(app, role, transport=transport, echo=click.echo, backend=backend, artifact=artifact,
                       dry_run=dry_run, poll_interval=email_poll_interval, script=script)
    result_file = os.environ.get("WORKFLOW_RESULT_FILE")
    if result_file:  # agentd reads how the run went (usage for budgets, the mail it handled)
        res = outcome.result
        Path(result_file).write_text(json.dumps({
            "ok": bool(res.ok) if res else outcome.busy == "", "ran": res is not None, "busy": outcome.busy,
            "error": res.error if res else "", "usage": dict(res.usage) if res else {},
            "turns": res.turns if res else 0, "handed": [r.message_id for r in outcome.handed],
        }), encoding="utf-8")
    if outcome.busy:
        sys.exit(75)  # EX_TEMPFAIL: try again later
    if outcome.result is not None and not outcome.result.ok:
        sys.exit(1)


@cli.command("run-role", cls=Command, help=RUN_ROLE_HELP)
@_run_params
@click.pass_context
def run_role_cmd(ctx: click.Context, /, **kw: Any) -> None:
    _run(_app(ctx), **kw)


@click.command("run-role", cls=Command, help=RUN_ROLE_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@config_option
@mail_root_option
@_run_params
def run_role_main_cmd(config_path: Path | None, mail_root: Path | None, **kw: Any) -> None:
    from workflow.app import App

    _run(App.load(config_path, mail_root), **kw)


def main() -> None:
    _exit_fast(lambda: run_role_main_cmd.main(prog_name="run-role"))
