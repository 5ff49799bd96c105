"""Relay: the copies of a message for roles on other hosts, handed to this host's Postfix.

A message accepted here (every guardrail checked) goes to each recipient's host. The copies for
this host's roles are stored here; the others are handed over SMTP to this host's own Postfix
instance (``ops.postfix``: loopback, ``[hosts.NAME] relay_port``; it relays for the holder of
this host's client certificate alone, kept in the state directory), one RCPT per mailbox, before
the server answers ``250``: the message is in Postfix's queue or the client is told to try again.
Postfix carries it to the roles' hosts, and retries while one is down; the receiving host checks
it all again (a peer's login, ``delivery.credentials``). A retried message is stored once there:
delivery is idempotent by Message-ID and content.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from collections.abc import Sequence

from workflow.core.config import Config
from workflow.core.errors import TransportError
from workflow.delivery.credentials import Identity
from workflow.policy.roster import Roster, Route


def elsewhere(config: Config, roster: Roster, mailboxes: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``mailboxes`` split into this host's and the other hosts' (all here without hosts)."""
    if not config.hosts or not config.this_host:
        return tuple(mailboxes), ()
    away = tuple(mb for mb in mailboxes if _placed(roster, mb) and roster.host_of(mb) != config.this_host)
    return tuple(mb for mb in mailboxes if mb not in away), away


def _placed(roster: Roster, mailbox: str) -> bool:
    """Whether a mailbox lives on one host: a role's or a panel member's. A bridge's mailbox (and
    the outbound spool) is where that bridge runs: each host keeps its own."""
    return mailbox in roster.roles or mailbox in roster.members


def hand(config: Config, roster: Roster, raw: bytes, mail_from: str, mailboxes: Sequence[str]) -> None:
    """Queue ``raw`` in this host's Postfix for ``mailboxes`` (of other hosts); TransportError
    when it is not taken — nothing was queued then, or the client's retry is stored once."""
    host = config.host(config.this_host)
    assert host is not None
    where = f"this host's relay (Postfix at {host.relay_address}:{host.relay_port})"
    cert, key = config.state.relay_client
    try:
        tls = ssl.create_default_context()
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # ours, on loopback: the proof is the client's
        tls.load_cert_chain(cert, key)
        with smtplib.SMTP(host.relay_address, host.relay_port, timeout=config.smtp.timeout) as s:
            s.starttls(context=tls)
            refused = s.sendmail(mail_from, [roster.address(mb) for mb in mailboxes], raw)
    except (OSError, smtplib.SMTPException) as e:
        raise TransportError(f"{where} did not take the copies for {', '.join(mailboxes)}: {e}") from None
    if refused:
        raise TransportError(f"{where} refused {', '.join(refused)}")


def not_from(roster: Roster, peer: Identity, role: str) -> str:
    """Why a peer's login may not relay mail from ``role`` ("" when it may): a peer relays the
    mail of the roles that live on its host, and poses as no other."""
    home = roster.host_of(role)
    return "" if home == peer.peer else f"{peer.describe()}; {role} lives on {home or 'no host'}"


def not_to(config: Config, roster: Roster, route: Route) -> str:
    """Why a peer may not deliver to ``route`` ("" when it may): a peer delivers to this host's
    mailboxes only, never through this host to another (nor out of the domain)."""
    here = config.this_host
    away = sorted({roster.host_of(mb) for mb in route.mailboxes} - {here})
    if not away and route.mailboxes and all(_placed(roster, mb) for mb in route.mailboxes):
        return ""
    where = f"lives on {', '.join(away)}" if away else "is no role's mailbox"
    return f"{route.address} {where}, not on {here}; a peer delivers to this host's roles only"


def not_bounce(config: Config, identity: Identity | None) -> str:
    """Why a null sender (a bounce) is refused on this connection ("" when it is taken): only
    this host's own relay sends one, to the roles of this host (``delivery.server.bounces``)."""
    if identity is not None and config.this_host and identity.peer == config.this_host:
        return ""
    return "a null sender (a bounce) is taken from this host's own relay only; a role's mail names its role"


async def onward(
    config: Config, roster: Roster, raw: bytes, mail_from: str, mailboxes: Sequence[str]
) -> tuple[str, ...]:
    """Hand the other hosts' copies of a message to this host's Postfix; the mailboxes left to
    store here."""
    here, away = elsewhere(config, roster, mailboxes)
    if away:  # in this host's Postfix queue before the 250
        await asyncio.get_running_loop().run_in_executor(None, hand, config, roster, raw, mail_from, away)
    return here
