"""Delivery: validate, check visibility, write durably, index — the one path every sender uses.

``workflow-notify`` (direct), the SMTP server and the bridges all call ``Deliverer.deliver``;
nothing reaches a Maildir another way. Nothing is written unless every check passes, and a
failed write leaves no copy in any new/.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from .config import Config
from .errors import IndexError_, MessageError, RosterError
from .index import Index
from .maildir import Entry, Maildirs
from .message import Parsed, parse, thread_ids, validate
from .roster import Roster, Route
from .visibility import check

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivered:
    message_id: str
    mailboxes: tuple[str, ...]
    entries: tuple[Entry, ...]


class Deliverer:
    """Holds what delivery needs; built at the entry point and reused."""

    def __init__(self, config: Config, roster: Roster, maildirs: Maildirs | None = None) -> None:
        self.config = config
        self.roster = roster
        self.maildirs = maildirs or Maildirs(config.mail_root)

    def open_index(self) -> Index:
        return Index(self.config.index_path, self.maildirs, self.config.domain)

    def routes(self, recipients: Sequence[str]) -> list[Route]:
        out: list[Route] = []
        for rcpt in recipients:
            r = self.roster.route(rcpt)
            if r.kind == "external":
                raise RosterError(f"{r.address}: relaying denied: no outbound bridge is configured")
            out.append(r)
        return out

    def check(self, raw: bytes, recipients: Sequence[str], index: Index) -> tuple[Parsed, str, list[Route]]:
        """Every check delivery makes, without writing; returns (parsed, sender, routes)."""
        parsed = parse(raw)
        validate(parsed, event_types=self.config.event_types, states=self.config.states)
        if parsed.message_id is None:
            raise MessageError("header Message-ID: missing")
        if not parsed.get("From"):
            raise MessageError("header From: missing")
        sender = self.roster.sender(parsed.sender)
        if not recipients:
            raise MessageError("no recipients")
        routes = self.routes(recipients)
        ancestry = thread_ids(parsed)
        check(self.roster, sender, routes, parsed.recipients, index.spaces(ancestry))
        return parsed, sender, routes

    def deliver(self, raw: bytes, recipients: Sequence[str]) -> Delivered:
        """Store one copy per distinct mailbox, durably, then index it."""
        with self.open_index() as index:
            parsed, sender, routes = self.check(raw, recipients, index)
            boxes = tuple(dict.fromkeys(mb for r in routes for mb in r.mailboxes))
            entries = self.maildirs.deliver(boxes, raw)
            mid = parsed.message_id or ""
            try:
                index.add(entries, raw, parsed)
            except IndexError_ as e:
                # The copies are durable; the next refresh indexes them from the Maildirs.
                log.warning("%s stored but not indexed: %s", mid, e)
        log.info("%s delivered from %s to %s", mid, sender, ", ".join(boxes))
        return Delivered(mid, boxes, tuple(entries))
