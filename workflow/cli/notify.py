"""CLI notify: ``workflow notify`` and the ``workflow-notify`` script — render a template and send it."""

from __future__ import annotations

import os

import click

from workflow.cli import fast
from workflow.cli.base import Command, app, keep_snapshot, params, run_script, standalone
from workflow.cli.runs import inside_run
from workflow.delivery.notify import request
from workflow.delivery.transport import make_transport


@click.command("notify", cls=Command, params=params(fast.NOTIFY))
@click.pass_context
def notify(
    ctx: click.Context,
    in_reply_to: str | None,
    sender: str | None,
    stdout: bool,
    via: str,
    event: str,
    artifact: str,
    to: str,
    pairs: tuple[str, ...],
) -> None:
    """Send a workflow message: render EVENT's template and deliver it.

    TO is one role or several separated by commas (spec-reviewer,test-writer); a panel, a panel
    member or a panel address (spec-discussion) works too. KEY=VALUE pairs fill the template
    (CONTEXT, QUESTION, BLOCKING, NEXT_STATE, NEXT_ROLES, BLOCKING_DETAILS, NEXT_ACTIONS, REASON…).
    An approval is copied to NEXT_ROLES, else to the sender role's hands_off. The sender is --from,
    else $WORKFLOW_ROLE, else [workflow] default_sender ("user"). Prints the new Message-ID.

    Inside a run ($WORKFLOW_RUN, set by run-role for a command-backend agent) the message goes to
    the server with the run's credential: checked at once, delivered only if the run succeeds; the
    sender is the run's role.

    \b
    Example:
        workflow-notify review-request specs/proposed/user-auth.md spec-reviewer CONTEXT="Focus on error handling"
        workflow-notify --in-reply-to "<20251114103000.spec-writer@workflow.local>" clarification-request specs/proposed/user-auth.md spec-writer QUESTION="Expire or refresh?" BLOCKING=no
    """
    a = app(ctx)
    run = inside_run(sender)
    who = run.role if run else sender or os.environ.get("WORKFLOW_ROLE") or a.config.default_sender
    req = request(event, artifact, to, who, in_reply_to, pairs)
    composed = a.compose(req)
    if stdout:
        click.echo(composed.raw.decode("utf-8", "replace").replace("\r\n", "\n"), nl=False)
        return
    where = composed.send(make_transport(a.config, a.deliverer, via))
    click.echo(composed.message_id)
    click.echo(f"{'staged' if run else 'sent'} {event} to {', '.join(composed.recipients)} ({where})", err=True)
    keep_snapshot(ctx)


script = standalone(notify, "workflow-notify")


def main() -> None:
    """The ``workflow-notify`` script."""
    run_script(script, "workflow-notify")
