"""Bridges: every bridge there is, in one tuple (each a ``bridges.base.Bridge``), and lookups by name."""

from __future__ import annotations

from workflow.bridges.base import Bridge
from workflow.bridges.gmail.entry import BRIDGE as GMAIL
from workflow.bridges.slack.entry import BRIDGE as SLACK
from workflow.core.errors import ConfigError

BRIDGES: tuple[Bridge, ...] = (GMAIL, SLACK)


def bridge(name: str) -> Bridge:
    """The bridge called ``name``; refused naming the known ones."""
    for b in BRIDGES:
        if b.name == name:
            return b
    raise ConfigError(f"unknown bridge {name!r}; expected one of {', '.join(b.name for b in BRIDGES)}")
