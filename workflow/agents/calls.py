"""Calls: one tool call of a run as its log shows it — the tool's name and its arguments, cut short."""

from __future__ import annotations

import json


def call_line(name: str, arguments: object) -> str:
    """One tool call as the run's log shows it: its name and its arguments, cut short (the
    agent's own words, so one line of printable text)."""
    if isinstance(arguments, str):
        detail = arguments
    elif isinstance(arguments, dict) and arguments:
        detail = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items())
    else:
        detail = ""
    detail = "".join(c if c.isprintable() else " " for c in detail)
    detail = detail if len(detail) <= 120 else detail[:119] + "…"
    name = "".join(c for c in str(name) if c.isprintable())[:80] or "?"
    return f"{name}({detail})"
