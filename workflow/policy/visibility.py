"""Visibility: the panel boundaries, checked in one place before any copy is written; and
``Sight``, what one viewer may read, judged in one place for every page and stream of the cockpit.

Rules (each refusal names its rule):
  internal-members-only       only members of a panel may send to its internal address
  internal-no-mixing          internal mail reaches members only: no non-member recipient beside it
  internal-named-in-headers   an internal address on the envelope must be in To/Cc, so the stored
                              copy says which space it belongs to (and reindex can tell)
  internal-thread-stays-inside a message whose In-Reply-To/References point into an internal
                              thread may only be sent by and to that panel's members; a
                              -discussion address or another role needs a new thread

Reading (``Sight``): a viewer reads a message when a copy of it is in one of its mailboxes (a
panel reads through its members') or it sent it itself — what ``workflow thread --as`` shows. A
run's log and transcript are a role's mail: the viewer reads them when it reads every mailbox of
that role. The owner reads every run; its mail pages are those of the role it views as.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from workflow.core.errors import RosterError, VisibilityError
from workflow.mail.rows import Row
from workflow.policy.roster import MEMBERS_ONLY as MEMBERS_ONLY_NAME
from workflow.policy.roster import Roster, Route


class FixedRule(NamedTuple):
    """A rule that is always on (it keeps a boundary, not a workflow habit): its name and what it refuses."""

    name: str
    refuses: str


MEMBERS_ONLY = FixedRule(MEMBERS_ONLY_NAME, "a non-member sending to {kind}-{writer|reviewer}-panel-internal@")
NO_MIXING = FixedRule("internal-no-mixing", "internal mail that would also reach a non-member")
NAMED_IN_HEADERS = FixedRule(
    "internal-named-in-headers", "an internal address used on the envelope but absent from To/Cc"
)
STAYS_INSIDE = FixedRule(
    "internal-thread-stays-inside",
    "a reply whose In-Reply-To/References point into an internal thread, sent by or to a non-member "
    "(cross-panel mail starts a new thread)",
)
RULES = (MEMBERS_ONLY, NO_MIXING, NAMED_IN_HEADERS, STAYS_INSIDE)


def check(
    roster: Roster,
    sender: str,
    routes: Sequence[Route],
    header_recipients: Sequence[str],
    ancestry_spaces: Mapping[str, str],
) -> None:
    """Raise VisibilityError when delivering from ``sender`` to ``routes`` would cross a boundary."""
    for r in routes:
        decision = roster.may_send(sender, r)
        if not decision.allowed:
            raise VisibilityError(decision.rule, decision.reason)
    named = {roster.address(a) for a in header_recipients}
    spaces: dict[str, Route] = {}
    for r in routes:
        if r.space:
            if r.address not in named:
                raise VisibilityError(
                    NAMED_IN_HEADERS.name,
                    f"{r.address} is a panel-internal address; name it in To or Cc, not only on the envelope",
                )
            spaces[r.space] = r
    for addr in header_recipients:
        try:
            hr = roster.route(addr)
        except RosterError:
            continue  # unknown header addresses are not delivered to; routing refuses envelope ones
        if hr.space:
            spaces[hr.space] = hr
    delivered = {mb for r in routes for mb in r.mailboxes}
    for r in spaces.values():
        outsiders = sorted(delivered - set(r.mailboxes))
        if outsiders:
            raise VisibilityError(
                NO_MIXING.name,
                f"mail for {r.address} may reach only its members; it would also reach {', '.join(outsiders)}",
            )
        if sender not in r.senders:
            raise VisibilityError(
                MEMBERS_ONLY.name,
                f"{r.address} is internal to a panel; only {', '.join(r.senders)} may send to it, not {sender}",
            )
    for mid, space in ancestry_spaces.items():
        inside = roster.route(space)
        outsiders = sorted(delivered - set(inside.mailboxes))
        if outsiders or sender not in inside.senders:
            who = f"would reach {', '.join(outsiders)}" if outsiders else f"is sent by {sender}, not a member"
            raise VisibilityError(
                STAYS_INSIDE.name,
                f"{mid} belongs to the internal thread of {space}; this reply {who}. "
                "Start a new thread (no In-Reply-To/References) to write across panels",
            )


class _Index(Protocol):
    def query(
        self,
        mailboxes: Sequence[str] | None = None,
        *,
        message_ids: Sequence[str] | None = None,
        senders: Sequence[str] = (),
    ) -> list[Row]: ...


class Sight(NamedTuple):
    """What one viewer may read: the judge every cockpit page, stream and link asks."""

    identity: str  # the role, panel or member it views as
    boxes: tuple[str, ...]  # the mailboxes it reads
    sent: tuple[str, ...]  # the addresses whose sent mail is its own
    owner: bool  # the owner: every run's log and transcript too
    roster: Roster

    @classmethod
    def of(cls, roster: Roster, identity: str, owner: bool = False) -> Sight:
        boxes, sent = roster.view(identity)
        return cls(identity, boxes, sent, owner, roster)

    def reads(self, row: Row) -> bool:
        """Whether this copy is one the viewer reads (in its mailboxes, or sent by it)."""
        return row.mailbox in self.boxes or row.sender.lower() in self.sent

    def readable(self, index: _Index, message_ids: Iterable[str | None]) -> set[str]:
        """Those of these Message-IDs the viewer may read (a copy in its mailboxes, or its own):
        the only ones a page may link to or name."""
        mids = sorted({m for m in message_ids if m})
        if not mids:
            return set()
        return {r.message_id for r in index.query(self.boxes, message_ids=mids, senders=self.sent) if r.message_id}

    def on_board(self, row: Row) -> bool:
        """Whether the board may count this copy (an artifact's history is the team's): any mail
        but a panel's internal mail, which only its members see. A link needs ``readable``."""
        return not row.space or row.mailbox in self.boxes

    def reads_role(self, role: str) -> bool:
        """Whether the viewer reads ``role``'s mail, hence its runs' logs and transcripts."""
        if self.owner:
            return True
        try:
            theirs = self.roster.mailboxes_of(role)
        except RosterError:
            return False  # a role gone from the roster: its old runs are the owner's to read
        return bool(theirs) and set(theirs) <= set(self.boxes)
