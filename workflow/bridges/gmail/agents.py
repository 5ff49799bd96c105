"""Agents: the seam between the Gmail bridge and the agents it runs (the todo forwarder…).

An agent names the label it acts on; ``on_label`` runs as a message gets that label during a
cycle, ``post_label`` scans INBOX for labelled mail (hand-labelled included). Each returns what
it did as ``Result`` rows; the bridge's registry (``bridge.make_agents``) lists the agents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from workflow.app import App
from workflow.bridges.gmail.imap import Fetched, Imap
from workflow.bridges.gmail.settings import GmailConfig


class Result(NamedTuple):
    agent: str
    uid: int
    status: str  # ok | skipped | error
    info: str


class Context(NamedTuple):
    app: App
    s: GmailConfig
    imap: Imap
    dry_run: bool
    say: Callable[[str], None]
    uid: int = 0
    message: Fetched | None = None
    label: str = ""
    tried: set[int] | None = None  # UIDs an agent already tried this cycle (no immediate retry)


class Agent(Protocol):
    """A bridge agent: on_label runs as a message is labelled; post_label scans INBOX for the rest."""

    name: str
    label: str

    def enabled(self, ctx: Context) -> bool: ...

    def on_label(self, ctx: Context) -> Result: ...

    def post_label(self, ctx: Context) -> list[Result]: ...
