"""Delivery: validate, guard, check visibility, write durably, index — the one path for all mail.

``workflow-notify`` (direct), the SMTP server and the bridges all go through ``Deliverer``:
``prepare`` (every check, no writes), ``store`` (durable, all-or-nothing) and ``record`` (the
index); ``deliver`` runs the three in order. The server runs the same ``prepare`` and hands the
plan to ``commit.Committer``, which stores with the same Maildir steps and records with the same
``record_many``, batching concurrent transactions.
Nothing is written unless every check passes, and a failed write leaves no copy in any new/.
Copies are stored with LF line ends, Maildir's convention (SMTP's CRLF is converted once, here).
A message already stored with the same Message-ID and the same bytes (a client retrying after a
lost ``250``) is not stored again in the mailboxes that hold it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Container, Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from workflow.core.config import Config
from workflow.core.errors import GuardrailError, MailIndexError, MessageError, RosterError, TransportError
from workflow.delivery import plain, relay
from workflow.mail import imported
from workflow.mail.index import Index
from workflow.mail.maildir import Entry, Maildirs
from workflow.mail.message import (
    MAX_MULTIPARTS,
    Parsed,
    id_stamp,
    message_id_at,
    multiparts,
    parse,
    split_head,
    thread_ids,
    to_lf,
    validate,
)
from workflow.policy import guardrails
from workflow.policy.guardrails import History
from workflow.policy.roster import Roster, Route
from workflow.policy.visibility import check as check_visibility

log = logging.getLogger(__name__)


class IndexLagError(Exception):
    """The message refers to copies stored but not indexed yet: check it again once they are
    (every check that reads the index must see every committed copy)."""

    def __init__(self, message_ids: Sequence[str]) -> None:
        super().__init__(", ".join(message_ids))
        self.message_ids = tuple(message_ids)


class Plan(NamedTuple):
    """A checked message: the bytes to store, where, and what we learnt on the way."""

    raw: bytes
    message_id: str
    sender: str
    mailboxes: tuple[str, ...]
    already: tuple[str, ...]  # mailboxes holding this exact message already (a retry)
    parsed: Parsed


class Delivered(NamedTuple):
    message_id: str
    mailboxes: tuple[str, ...]
    entries: tuple[Entry, ...]
    already: tuple[str, ...] = ()


class Stamps:
    """The current second as a Message-ID's time part and as a Date header, formatted once per
    second: a server completes many messages in a second."""

    def __init__(self) -> None:
        self._second = -1
        self._id, self._date = "", b""

    def now(self) -> tuple[str, bytes]:
        """(``YYYYMMDDHHMMSS``, the RFC 5322 date) of this second."""
        second = int(time.time())
        if second != self._second:
            from email.utils import format_datetime  # lazy: start-up time (the email package)

            when = datetime.fromtimestamp(second, UTC)
            self._id, self._date = id_stamp(when), format_datetime(when).encode("ascii")
            self._second = second
        return self._id, self._date


def complete_headers(raw: bytes, role: Callable[[], str], domain: str, stamps: Stamps) -> bytes:
    """Prepend a Message-ID (of the documented form, naming the sender's ``role()``) and a Date
    when the message lacks them (nothing else is changed)."""
    head, _ = split_head(raw)
    lower = b"\n" + head.lower()
    if b"\nmessage-id:" in lower and b"\ndate:" in lower:
        return raw
    eol = b"\r\n" if b"\r\n" in head or not head else b"\n"
    stamp, date = stamps.now()
    extra = b""
    if b"\nmessage-id:" not in lower:
        extra += b"Message-ID: " + message_id_at(stamp, role(), domain).encode("ascii") + eol
    if b"\ndate:" not in lower:
        extra += b"Date: " + date + eol
    return extra + raw


class Deliverer:
    """Holds what delivery needs; built at the entry point and reused."""

    def __init__(
        self, config: Config, roster: Roster, maildirs: Maildirs | None = None, history: History | None = None
    ) -> None:
        self.config = config
        self.roster = roster
        self.history = history  # an artifact's past stays, read from git (guardrails.History)
        self.maildirs = maildirs or Maildirs(config.mail_root)
        self.stamps = Stamps()

    def open_index(self) -> Index:
        return Index(self.config.index_path, self.maildirs, self.config.domain)

    def routes(self, recipients: Sequence[str]) -> list[Route]:
        out: list[Route] = []
        for rcpt in recipients:
            r = self.roster.route(rcpt)
            if r.kind == "external" and not r.mailboxes:
                raise RosterError(f"{r.address}: relaying denied: no outbound bridge is configured")
            out.append(r)
        return out

    def prepare(
        self,
        raw: bytes,
        recipients: Sequence[str],
        index: Index,
        sender_hint: str = "",
        unindexed: Mapping[str, Sequence[Entry]] | None = None,
        known: Container[str] | None = None,
        person: bool = False,
    ) -> Plan:
        """Every check delivery makes, without writing anything.

        ``unindexed`` maps Message-IDs to copies stored but not yet in the index (the server
        indexes in batches after acknowledging; with several workers, also the copies the others
        told it of), so a quick retry is still recognised, and a message whose
        References/In-Reply-To name one of them raises ``IndexLagError``: the caller waits for the
        index and asks again, so visibility and reply checks see every copy. With ``known`` (every
        Message-ID the caller has stored, been told of or found indexed), an id outside it skips
        the index lookup: it cannot be a retry. With ``person`` (the server: a users-file login
        sent it), plain mail from a human role is typed as ``delivery.plain`` says."""
        raw = to_lf(complete_headers(raw, lambda: self._role(raw, sender_hint), self.config.domain, self.stamps))
        parsed = parse(raw)
        validate(parsed, event_types=self.config.event_types, states=self.config.states)
        if multiparts(raw) > MAX_MULTIPARTS:  # every reader would recurse that deep (RecursionError)
            raise MessageError(f"the message nests more than {MAX_MULTIPARTS} multipart parts")
        if not parsed.get("From"):
            raise MessageError("header From: missing")
        marks = imported.marks(parsed)
        if marks:  # the mark that keeps outside mail from being anyone's decision is the bridges' alone
            raise GuardrailError(
                guardrails.BRIDGE_MARK.name,
                f"header {marks[0]} marks mail a bridge imported from outside; no sender may write it — leave it out",
            )
        if person and parsed.get(plain.HEADER) is not None:
            raise MessageError(
                f"header {plain.HEADER} is the server's record of how it typed a person's mail; leave it out"
            )
        sender = self.roster.sender(parsed.sender)
        if not recipients:
            raise MessageError("no recipients")
        routes = self.routes(recipients)
        ancestry = thread_ids(parsed)
        if ancestry and unindexed:
            lowered = {k.lower() for k in unindexed}
            lagging = [m for m in ancestry if m in unindexed or m.lower() in lowered]
            if lagging:
                raise IndexLagError(lagging)
        role = self.roster.roles.get(sender)
        to = [mb for r in routes if r.kind != "external" for mb in r.mailboxes]
        if person and role is not None and role.mode == "human" and to:  # mail leaving the domain is not ours to type
            raw = to_lf(plain.infer(raw, parsed, sender, to, self.roster, index))
            parsed = parse(raw)
            validate(parsed, event_types=self.config.event_types, states=self.config.states)
        check_visibility(self.roster, sender, routes, parsed.recipients, index.spaces(ancestry))
        guardrails.check(self.config, self.roster, parsed, sender, index, history=self.history)
        mid = parsed.message_id or ""
        boxes = tuple(dict.fromkeys(mb for r in routes for mb in r.mailboxes))
        pending = (unindexed or {}).get(mid, ())
        if known is not None and mid not in known and not pending:
            already: tuple[str, ...] = ()
        else:
            already = self._already(index, mid, raw, boxes, pending)
        return Plan(raw, mid, sender, tuple(b for b in boxes if b not in already), already, parsed)

    def _role(self, raw: bytes, sender_hint: str) -> str:
        """Whose Message-ID the server writes: the role the From: names (else the envelope's)."""
        for address in (parse(raw).sender, sender_hint):
            try:
                return self.roster.sender(address)
            except RosterError:
                continue
        return "smtpd"

    def _already(
        self, index: Index, mid: str, raw: bytes, boxes: tuple[str, ...], pending: Sequence[Entry] = ()
    ) -> tuple[str, ...]:
        rows = [(r.mailbox, r.key) for r in index.query(message_ids=[mid]) if r.mailbox in boxes]
        rows += [(e.mailbox, e.key) for e in pending if e.mailbox in boxes]
        if not rows:
            return ()
        digest = hashlib.sha256(raw).digest()
        same: list[str] = []
        for mailbox, key in rows:
            entry = self.maildirs.find(mailbox, key)
            if entry is None:
                continue  # removed since it was stored: deliver again
            with open(entry.file, "rb") as f:  # a copy stored before LF line ends compares as LF
                if hashlib.sha256(to_lf(f.read())).digest() != digest:
                    raise MessageError(
                        f"Message-ID {mid} was already delivered to {mailbox} with different content; "
                        "a new message needs a new Message-ID"
                    )
            same.append(mailbox)
        return tuple(dict.fromkeys(same))

    def store(self, plan: Plan) -> list[Entry]:
        """Write every copy durably (blocking); all or nothing."""
        if not plan.mailboxes:
            return []
        return self.maildirs.deliver(plan.mailboxes, plan.raw)

    def record(self, index: Index, plan: Plan, entries: Sequence[Entry]) -> None:
        """Index the stored copies; a failure here loses nothing (refresh finds them)."""
        self.record_many(index, [(plan, entries)])

    def record_many(self, index: Index, done: Sequence[tuple[Plan, Sequence[Entry]]], *, text: bool = True) -> None:
        """Index several deliveries in one transaction (``text=False``: their full-text rows later,
        ``Index.fill_text``)."""
        items = [(entries, plan.raw, plan.parsed) for plan, entries in done if entries]
        if not items:
            return
        try:
            index.add_many(items, text=text)
        except MailIndexError as e:
            log.warning("%s stored but not indexed: %s", ", ".join(p.message_id for p, _ in done), e)

    def deliver(self, raw: bytes, recipients: Sequence[str], sender_hint: str = "") -> Delivered:
        """prepare → store → record, for callers that may block."""
        with self.open_index() as index:
            plan = self.prepare(raw, recipients, index, sender_hint)
            _, away = relay.elsewhere(self.config, self.roster, plan.mailboxes)
            if away:  # nothing stored here for another host's roles: only the server hands them on
                raise TransportError(
                    f"{', '.join(away)} live on another host: mail for them goes through this host's running "
                    "workflow smtpd (`workflow up`), which hands it to its Postfix; nothing was delivered"
                )
            if plan.mailboxes and plan.message_id and index.refresh(plan.mailboxes):
                # a copy stored by a process killed before it indexed it is a copy all the same
                plan = self.prepare(raw, recipients, index, sender_hint)
            entries = self.store(plan)
            self.record(index, plan, entries)
        if plan.already:
            log.info("%s already in %s: not stored again", plan.message_id, ", ".join(plan.already))
        log.info("%s delivered from %s to %s", plan.message_id, plan.sender, ", ".join(plan.mailboxes) or "-")
        return Delivered(plan.message_id, plan.mailboxes, tuple(entries), plan.already)
