"""Imported: the mark a bridge puts on the outside mail it stores, and how every reader tells it.

The Gmail bridge stores each message it imports with its provenance on top: ``X-Bridge: gmail``,
``X-Bridge-Source``, ``X-Bridge-UID``. Nobody else can put that mark on mail: the bridge renames
every ``X-Bridge*`` header an outside sender wrote (``X-Original-…``), and delivery refuses a
message carrying one from anyone at all, the owner included (``policy.guardrails.BRIDGE_MARK``).
So a stored copy with the mark is outside mail, whatever its From: says, and it is never taken
as a person's decision (``artifacts.decisions``) — not even one an older bridge stored before it
judged senders as the readers do.
"""

from __future__ import annotations

from workflow.mail.message import Parsed

MARK = "X-Bridge"  # the header a bridge's import begins with; its value names the bridge
PREFIX = MARK.lower()  # every header whose name begins so is the bridges' own


def marked(parsed: Parsed) -> bool:
    """Whether a stored copy is outside mail a bridge imported."""
    return parsed.get(MARK) is not None


def marks(parsed: Parsed) -> list[str]:
    """The headers of a message that only a bridge's import may write (for a refusal to name)."""
    return [name for name, _ in parsed.headers if name.lower().startswith(PREFIX)]
