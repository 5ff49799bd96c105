"""Bridge: the one shape every bridge has — a name, its ``[bridges.NAME]`` section, a loop that runs
until told to stop, and, for a bridge that carries mail out of the domain, its outbound drain.

Each bridge package exposes one ``BRIDGE`` (``bridges.gmail.entry``, ``bridges.slack.entry``);
``bridges.sections.BRIDGES`` lists them (the bridges stay independent of each other). The roster learns
of an outbound bridge from the config alone (``policy.roster.outbound_bridge``: a bridge section
with ``outbound = true``), so policy never imports a bridge.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from workflow.core.schema import Plugin

if TYPE_CHECKING:  # light to import: the registry is read at every command's start
    from workflow.app import App

Say = Callable[[str], None]


class Bridge(Protocol):
    """A bridge to the outside world."""

    @property
    def name(self) -> str: ...  # "gmail": ``workflow bridge NAME``, ``[bridges.NAME]``

    @property
    def about(self) -> str: ...  # one line for listings

    @property
    def section(self) -> Plugin: ...  # its ``[bridges.NAME]`` section (``core.schema``)

    def configured(self, app: App) -> bool:
        """Its ``[bridges.NAME]`` section is present."""
        ...

    def run(self, app: App, say: Say, stop: threading.Event) -> None:
        """Work until ``stop`` is set (refused with a ConfigError when its section is missing or wrong)."""
        ...

    def outbound(self, app: App, say: Say, dry_run: bool = False) -> int | None:
        """Send the mail waiting to leave the domain; the count sent, or None: this bridge sends none."""
        ...
