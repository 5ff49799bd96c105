"""Bridges: every bridge there is, in one tuple (each a ``bridges.base.Bridge``, carrying its
``[bridges.NAME]`` section), the sections read from it, and a lookup by name.

The composition root (``cli.base``, the ops that build an ``App``) passes ``SECTIONS`` to
``App.load``/``load_config``; core reads ``[bridges.NAME]`` against them and names no bridge.
A new bridge adds its ``entry.BRIDGE`` here, and nothing else.
"""

from __future__ import annotations

from workflow.bridges.base import Bridge
from workflow.bridges.gmail.entry import BRIDGE as GMAIL
from workflow.bridges.slack.entry import BRIDGE as SLACK
from workflow.core.errors import ConfigError
from workflow.core.schema import Plugin

BRIDGES: tuple[Bridge, ...] = (GMAIL, SLACK)
SECTIONS: tuple[Plugin, ...] = tuple(b.section for b in BRIDGES)


def bridge(name: str) -> Bridge:
    """The bridge called ``name``; refused naming the known ones."""
    for b in BRIDGES:
        if b.name == name:
            return b
    raise ConfigError(f"unknown bridge {name!r}; expected one of {', '.join(b.name for b in BRIDGES)}")
