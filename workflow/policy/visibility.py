"""Visibility: the panel boundaries, checked in one place before any copy is written.

Rules (each refusal names its rule):
  internal-members-only       only members of a panel may send to its internal address
  internal-no-mixing          internal mail reaches members only: no non-member recipient beside it
  internal-named-in-headers   an internal address on the envelope must be in To/Cc, so the stored
                              copy says which space it belongs to (and reindex can tell)
  internal-thread-stays-inside a message whose In-Reply-To/References point into an internal
                              thread may only be sent by and to that panel's members; a
                              -discussion address or another role needs a new thread
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workflow.core.errors import VisibilityError
from workflow.policy.roster import Roster, Route


def check(
    roster: Roster,
    sender: str,
    routes: Sequence[Route],
    header_recipients: Sequence[str],
    ancestry_spaces: Mapping[str, str],
) -> None:
    """Raise VisibilityError when delivering from ``sender`` to ``routes`` would cross a boundary."""
    for r in routes:
        ok, why = roster.may_send(sender, r)
        if not ok:
            raise VisibilityError("internal-members-only", why.split(": ", 1)[1])
    named = {roster.address(a) for a in header_recipients}
    spaces: dict[str, Route] = {}
    for r in routes:
        if r.space:
            if r.address not in named:
                raise VisibilityError(
                    "internal-named-in-headers",
                    f"{r.address} is a panel-internal address; name it in To or Cc, not only on the envelope",
                )
            spaces[r.space] = r
    for addr in header_recipients:
        try:
            hr = roster.route(addr)
        except Exception:
            continue  # unknown header addresses are not delivered to; routing refuses envelope ones
        if hr.space:
            spaces[hr.space] = hr
    delivered = {mb for r in routes for mb in r.mailboxes}
    for space, r in spaces.items():
        outsiders = sorted(delivered - set(r.mailboxes))
        if outsiders:
            raise VisibilityError(
                "internal-no-mixing",
                f"mail for {r.address} may reach only its members; it would also reach {', '.join(outsiders)}",
            )
        if sender not in r.senders:
            raise VisibilityError(
                "internal-members-only",
                f"{r.address} is internal to a panel; only {', '.join(r.senders)} may send to it, not {sender}",
            )
    for mid, space in ancestry_spaces.items():
        inside = roster.route(space)
        outsiders = sorted(delivered - set(inside.mailboxes))
        if outsiders or sender not in inside.senders:
            who = f"would reach {', '.join(outsiders)}" if outsiders else f"is sent by {sender}, not a member"
            raise VisibilityError(
                "internal-thread-stays-inside",
                f"{mid} belongs to the internal thread of {space}; this reply {who}. "
                "Start a new thread (no In-Reply-To/References) to write across panels",
            )
