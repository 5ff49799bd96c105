"""CLI bridges: ``workflow bridge gmail|rebuild-thread|slack|list`` — the outside world's mail and chat."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import click

from workflow.bridges.gmail.bridge import cycle, run, settings
from workflow.bridges.gmail.conversation import rebuild_thread
from workflow.bridges.sections import BRIDGES
from workflow.bridges.slack.bridge import Bridge, configured
from workflow.bridges.slack.receive import replay, serve
from workflow.cli.base import Command, Group, app
from workflow.policy.roster import outbound_bridge


@click.group(cls=Group)
def bridge() -> None:
    """Bridges to the outside world's mail.

    \b
    Example:
        workflow bridge gmail --once
    """


def _say(name: str) -> Callable[[str], None]:
    def say(line: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} {name}: {line}", err=True)

    return say


@bridge.command("gmail", cls=Command)
@click.option("--once", is_flag=True, help="One cycle, then exit (default: cycle every poll_interval).")
@click.option("--dry-run", is_flag=True, help="Change nothing on the server and send nothing; say what would happen.")
@click.pass_context
def bridge_gmail(ctx: click.Context, once: bool, dry_run: bool) -> None:
    """Import INBOX into the mapped role, label it (reply_needed, review, todo, summarize), run the
    agents (todo forwarder…), ask a conversation's role about its correspondent's new replies
    (agentd runs it) and send its answers, and submit workflow mail addressed outside the domain.

    Configured under [bridges.gmail] (imap_host, user, password_env or xoauth2_command, role…).

    \b
    Example:
        workflow bridge gmail --once --dry-run
    """
    a = app(ctx)
    s = settings(a)
    say = _say("gmail")
    if once:
        for r in cycle(a, s, say, dry_run):
            click.echo(f"{r.agent} uid {r.uid}: {r.status} ({r.info})")
        return
    stopping = {"now": False}

    def stop(signum: int, frame: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    run(a, s, say, lambda: stopping["now"], dry_run)


@bridge.command("rebuild-thread", cls=Command)
@click.argument("conversation", type=click.Path(path_type=Path, exists=True, file_okay=False))
def bridge_rebuild(conversation: Path) -> None:
    """Rebuild CONVERSATION/thread.md from its numbered reply and response files.

    \b
    Example:
        workflow bridge rebuild-thread ~/.maildir/workflow/.workflow/conversations/ID
    """
    click.echo(rebuild_thread(conversation), nl=False)


@bridge.command("slack", cls=Command)
@click.option(
    "--replay",
    "replay_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Feed recorded event payloads (JSON array or JSON lines) through the same path, post the answers already in, exit.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="HTTP mode's port (default [bridges.slack] port, 3000; 0 picks one).",
)
@click.option(
    "--mode",
    type=click.Choice(["auto", "socket", "http"]),
    default=None,
    help="Socket Mode (a websocket to Slack, no public URL) or HTTP (the Events API); auto: socket when $SLACK_APP_TOKEN is set.",
)
@click.pass_context
def bridge_slack(ctx: click.Context, replay_file: str | None, port: int | None, mode: str | None) -> None:
    """The Slack inbox agent (Bolt for Python): requests in the watched channel are classified
    and become question mail to a role, From the thread's own address; agentd runs the role
    (run agentd too: `workflow up`), and its answer goes back to the thread as a Block Kit
    message with a status reaction. Todos are answered at once, from a local list.

    Configured under [bridges.slack] (bot_token_env, app_token_env or signing_secret_env,
    channel, roles…; see docs/bridges.md); how long a role may take is [agentd] role_timeouts.

    \b
    Example:
        SLACK_APP_TOKEN=xapp-… SLACK_BOT_TOKEN=xoxb-… workflow bridge slack
        workflow bridge slack --mode http --port 3000
        workflow bridge slack --replay events.jsonl
    """
    a = app(ctx)
    s, keys = configured(a, mode=mode, receiving=replay_file is None)
    if port is not None:
        s = s._replace(port=port)
    say = _say("slack")
    b = Bridge(a, s, keys, say)
    if replay_file:
        n = replay(b, replay_file)
        click.echo(f"replayed {n} event(s): " + ", ".join(f"{k} {v}" for k, v in sorted(b.store.counts().items())))
        return

    def stop(signum: int, frame: object) -> None:
        b.stopping.set()
        b.wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    serve(b, say)


@bridge.command("list", cls=Command)
@click.pass_context
def bridge_list(ctx: click.Context) -> None:
    """List every bridge: its name, whether this project configures it ([bridges.NAME]), whether it
    carries mail out of the domain (outbound = true), and what it does.

    \b
    Example:
        workflow bridge list
    """
    a = app(ctx)
    out = outbound_bridge(a.config)
    for b in BRIDGES:
        state = "configured" if b.configured(a) else "off"
        click.echo(f"  {b.name:<8} {state:<10} {'outbound' if b.name == out else '-':<8}  {b.about}")
