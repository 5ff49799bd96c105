"""Addresses: the one parser and formatter for panel names and the addresses built from them.

A panel is named ``{kind}-{writer|reviewer}-panel`` (``spec-reviewer-panel``). From that name come
its member mailboxes ``{panel}.{member}``, its internal address ``{panel}-internal`` (members
only) and the cross-panel ``{kind}-discussion`` address. Config, the roster, the index and the
guardrails all read and write these forms through this module and nowhere else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SIDES = ("writer", "reviewer")
INTERNAL_SUFFIX = "-internal"
PANEL_RE = re.compile(r"^([a-z0-9][a-z0-9_-]*?)-(writer|reviewer)-panel$")
INTERNAL_RE = re.compile(r"^([a-z0-9][a-z0-9_-]*?)-(writer|reviewer)-panel-internal$")
DISCUSSION_RE = re.compile(r"^([a-z0-9][a-z0-9_-]*?)-discussion$")
SOLO_RE = re.compile(r"^(.*)-(writer|reviewer)$")


class PanelName(NamedTuple):
    """``spec-reviewer-panel`` split: the artifact kind it works on and its side."""

    kind: str  # the artifact kind: spec, skeleton, test…
    side: str  # writer | reviewer

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.side}-panel"


def parse_panel(name: str) -> PanelName | None:
    """The parts of a panel name, or None when ``name`` is not one."""
    m = PANEL_RE.match(name)
    return PanelName(m.group(1), m.group(2)) if m else None


def member_mailbox(panel: str, member: str) -> str:
    """``spec-reviewer-panel.claude``: one member's own mailbox."""
    return f"{panel}.{member}"


def internal_address(panel: str) -> str:
    """``spec-reviewer-panel-internal``: the local part only the panel's members reach."""
    return f"{panel}{INTERNAL_SUFFIX}"


def parse_internal(local: str) -> str | None:
    """The panel whose internal address ``local`` is, or None."""
    m = INTERNAL_RE.match(local)
    return f"{m.group(1)}-{m.group(2)}-panel" if m else None


def discussion_address(kind: str) -> str:
    """``spec-discussion``: both sides of one artifact kind, across panels."""
    return f"{kind}-discussion"


def parse_discussion(local: str) -> str | None:
    """The artifact kind of a discussion address, or None."""
    m = DISCUSSION_RE.match(local)
    return m.group(1) if m else None


def solo_kind(role: str) -> str | None:
    """The artifact kind of a solo ``{kind}-writer``/``{kind}-reviewer`` role, or None."""
    m = SOLO_RE.match(role)
    return m.group(1) if m else None
