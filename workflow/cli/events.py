"""CLI events: ``workflow events`` — print the event-type registry (``core.events``) as configured."""

from __future__ import annotations

import json

import click

from workflow.cli.base import Command, app, json_option
from workflow.core import events as registry
from workflow.core.config import Config
from workflow.core.errors import TemplateError
from workflow.mail.templates import template_path


def rows(config: Config) -> list[dict[str, object]]:
    """Every configured event type, then every built-in one the project leaves out, with its template."""
    names = [*config.event_types, *(n for n in registry.NAMES if n not in config.event_types)]
    out = []
    for name in names:
        try:
            template = str(template_path(name, config.templates_dir))
        except TemplateError:
            template = ""
        row = registry.get(name).to_dict()
        out.append({**row, "configured": name in config.event_types, "template": template})
    return out


@click.command(cls=Command)
@json_option
@click.pass_context
def events(ctx: click.Context, as_json: bool) -> None:
    """List every event type: inbox priority (0 first), colour, the variable `workflow move
    --reason` fills, the move a decision makes, the move it is the default for, its compose
    rules and the template it renders ("MISSING": write one, or drop the event type).

    \b
    Example:
        workflow events
        workflow events --json
    """
    found = rows(app(ctx).config)
    if as_json:
        click.echo(json.dumps({"events": found, "rules": dict(registry.RULES)}, indent=2))
        return
    width = max(len(str(r["name"])) for r in found)
    for r in found:
        decision = r["decision"]
        parts = [
            f"priority {r['priority']}",
            f"style {r['style'] or 'plain'}",
            f"reason {r['reason']}",
            *([f"decision {decision[0]}->{decision[1]}"] if isinstance(decision, list) else []),
            *([f"default for a move into {r['enters']}"] if r["enters"] not in (None, registry.ANY) else []),
            *(["default for any other move"] if r["enters"] == registry.ANY else []),
            *([f"rules {', '.join(map(str, r['rules']))}"] if r["rules"] else []),  # type: ignore[call-overload]
        ]
        off = "" if r["configured"] else "  (not in [workflow] event_types)"
        click.echo(f"{r['name']:<{width}}  {r['summary']}{off}")
        click.echo(f"{'':<{width}}  {'; '.join(parts)}")
        click.echo(f"{'':<{width}}  template {r['template'] or 'MISSING'}")
    click.echo("\nRules:")
    for name, what in registry.RULES.items():
        click.echo(f"  {name}: {what}")
