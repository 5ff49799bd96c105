"""CLI roster: who reaches whom — ``roster``, ``route ADDRESS`` — the rules mail must pass (``guardrails``)
and the backends a run can use (``backends``)."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from workflow.cli.base import Command, app, json_option
from workflow.core.backendkinds import KINDS
from workflow.core.errors import RosterError, VisibilityError, WorkflowError
from workflow.policy.guardrails import ALWAYS, listing


@click.command(cls=Command)
@json_option
@click.pass_context
def roster(ctx: click.Context, as_json: bool) -> None:
    """Print every role, panel and address, the mailboxes each address reaches, and the hand-offs.

    A role's hand-off (``hands_off`` in its role file) is who its approval is copied to when it
    names no NEXT_ROLES; a review panel hands off as its solo reviewer role.

    \b
    Example:
        workflow roster
    """
    ros = app(ctx).roster
    if as_json:
        click.echo(json.dumps(ros.to_dict(), indent=2))
        return
    cfg = app(ctx).config
    if ros.hosts:
        here = cfg.this_host or "not chosen yet: `workflow host NAME`"
        click.echo(f"Hosts ({len(ros.hosts)}; this is {here}):")
        for h in cfg.hosts:
            click.echo(f"  {h.name:<30} {h.address}")
        click.echo("")
    click.echo(f"Roles ({len(ros.roles)}):")
    for r in ros.roles.values():
        handoff = ros.hands_off(r.name)  # checked against the roster: an unknown name is refused here
        after = f"; hands off to {', '.join(handoff)}" if handoff else ""
        on = f"on {ros.host_of(r.name):<{max(map(len, ros.hosts))}}  " if ros.hosts else ""
        click.echo(f"  {r.name:<30} {r.mode:<6} {on}triggers: {', '.join(r.triggers) or '-'}{after}")
    click.echo(f"\nPanels ({len(ros.panels)}):")
    for p in ros.panels.values():
        handoff = ros.hands_off(p.name)
        after = f"; hands off to {', '.join(handoff)}" if handoff else ""
        members = ", ".join(
            m.name + (f" (on {ros.host_of(p.mailbox(m.name))})" if ros.hosts else "") for m in p.members
        )
        click.echo(f"  {p.name:<30} {p.kind:<8} members: {members}{after}")
    click.echo(f"\nAddresses (@{ros.domain}):")
    for route in map(ros.route, ros.known_locals()):
        click.echo(f"  {route.address:<48} {route.kind:<10} → {', '.join(route.mailboxes) or '-'}")
    click.echo(
        "\nSync helper roles (*-writing-helper) take no mail. Anything outside the domain is refused"
        " unless an outbound bridge is configured."
    )


@click.command(cls=Command)
@click.argument("address")
@click.option("--from", "sender", metavar="ROLE", help="Also say whether ROLE may send to it.")
@json_option
@click.pass_context
def route(ctx: click.Context, address: str, sender: str | None, as_json: bool) -> None:
    """Explain whom ADDRESS reaches and, with --from, whether ROLE may send to it.

    Exits 0 when the mail would be delivered, non-zero with the rule when not.

    \b
    Example:
        workflow route spec-reviewer-panel-internal --from spec-writer
    """
    ros = app(ctx).roster
    r = ros.route(address)
    refusal: WorkflowError | None = None
    if r.kind == "external" and not r.mailboxes:
        refusal = RosterError(f"{r.address}: relaying denied: no outbound bridge is configured")
    decision = None
    if sender and refusal is None:
        who = ros.sender(sender)
        decision = ros.may_send(who, r)
        if not decision.allowed:
            refusal = VisibilityError(decision.rule, decision.reason)
    if as_json:
        out: dict[str, object] = {
            "address": r.address,
            "kind": r.kind,
            "explanation": r.explanation,
            "mailboxes": list(r.mailboxes),
        }
        if decision is not None:
            out["from"] = {
                "sender": sender,
                "allowed": decision.allowed,
                "reason": decision.reason,
                "rule": decision.rule,
            }
        click.echo(json.dumps(out, indent=2))
    else:
        click.echo(f"{r.address}: {r.kind}")
        click.echo(f"  {r.explanation}")
        click.echo(f"  mailboxes: {', '.join(r.mailboxes) or '(none)'}")
        if decision is not None:
            click.echo(f"  from {sender}: {'allowed' if decision.allowed else 'refused'} ({decision.reason})")
    if refusal is not None:
        raise refusal


@click.command(cls=Command)
@json_option
@click.pass_context
def guardrails(ctx: click.Context, as_json: bool) -> None:
    """List every rule delivery checks: the guardrails ([guardrails], on or off) and the rules
    that are always on (visibility boundaries, sender identity), with what each refuses.

    \b
    Example:
        workflow guardrails
    """
    rules = listing(app(ctx).config)
    if as_json:
        click.echo(
            json.dumps({"guardrails": [r.to_dict() for r in rules], "always": [r._asdict() for r in ALWAYS]}, indent=2)
        )
        return
    width = max(len(name) for name in [*(r.name for r in rules), *(f.name for f in ALWAYS)])
    click.echo("Guardrails ([guardrails] in workflow.toml; default in brackets):")
    for r in rules:
        state = ("on " if r.on else "off") + ("" if r.on == r.default else f" [{'on' if r.default else 'off'}]")
        click.echo(f"  {r.name:<{width}}  {state:<9} refuses {r.refuses}")
    click.echo("\nAlways on:")
    for f in ALWAYS:
        click.echo(f"  {f.name:<{width}}  {'on':<9} refuses {f.refuses}")


@click.command(cls=Command)
@json_option
def backends(as_json: bool) -> None:
    """List every backend a run can use ([workflow] backend, a role's backend, --backend): its name,
    whether it runs a program (an agent CLI, in the run's sandbox) and what it is.

    \b
    Example:
        workflow backends
    """
    if as_json:
        click.echo(json.dumps([asdict(k) for k in KINDS], indent=2))
        return
    width = max(len(k.name) for k in KINDS)
    for k in KINDS:
        runs = "profile" if k.profile else "process" if k.process else "in-proc"
        click.echo(f"  {k.name:<{width}}  {runs:<7}  {k.about}")
