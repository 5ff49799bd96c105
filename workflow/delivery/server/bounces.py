"""Bounces: a delivery status notification from this host's own relay, stored as workflow mail.

When this host's Postfix gives up on a copy for another host's role (``maximal_queue_lifetime``),
it sends a DSN (``MAIL FROM:<>``, ``multipart/report``) to the sender's address, which its
transport map sends back to this host's ``workflow smtpd``. A null sender is no workflow
identity: it is taken from this host's own relay's login only (``relay.not_bounce``), and each
failed recipient becomes a ``blocker-report`` to the role whose mail it was, from the role it did
not reach, naming that role, its host and Postfix's diagnostic — mail its sender can read and act on.
"""

from __future__ import annotations

import asyncio
import email
import email.message
from typing import NamedTuple, Protocol

from aiosmtpd.smtp import Envelope

from workflow.core.errors import RosterError, WorkflowError
from workflow.delivery.deliverer import Deliverer, Plan
from workflow.delivery.notify import NotifyRequest, compose
from workflow.delivery.server.commit import Committer
from workflow.policy.roster import Roster


class Handler(Protocol):
    """The server's handler, as far as a bounce needs it (``smtpd.Handler``)."""

    deliverer: Deliverer
    committer: Committer

    @property
    def roster(self) -> Roster: ...

    async def _prepare(self, raw: bytes, envelope: Envelope, person: bool = False) -> Plan: ...


class Failed(NamedTuple):
    recipient: str
    diagnostic: str


class Bounce(NamedTuple):
    failed: tuple[Failed, ...]
    original_from: str
    original_id: str
    artifacts: tuple[str, ...]


def read(raw: bytes) -> Bounce | None:
    """The failed recipients and the original message's sender, Message-ID and artifacts of a
    DSN (RFC 3464), or None when ``raw`` is not one."""
    msg = email.message_from_bytes(raw)
    if msg.get_content_type() != "multipart/report":
        return None
    failed: list[Failed] = []
    original: email.message.Message | None = None
    for part in msg.walk():
        kind = part.get_content_type()
        if kind == "message/delivery-status":
            blocks = part.get_payload()
            for block in blocks if isinstance(blocks, list) else []:
                if not isinstance(block, email.message.Message):
                    continue
                if str(block.get("Action", "")).strip().lower() != "failed":
                    continue
                rcpt = str(block.get("Final-Recipient", "")).partition(";")[2].strip()
                why = " ".join(str(block.get("Diagnostic-Code", block.get("Status", ""))).split())
                if rcpt:
                    failed.append(Failed(rcpt, why))
        elif kind in ("message/rfc822", "text/rfc822-headers") and original is None:
            inner = part.get_payload()
            if isinstance(inner, list) and inner and isinstance(inner[0], email.message.Message):
                original = inner[0]
            elif isinstance(inner, str):
                original = email.message_from_string(inner)
    if not failed or original is None:
        return None
    artifacts = tuple(a.strip() for a in str(original.get("X-Artifacts", "")).split(",") if a.strip())
    return Bounce(tuple(failed), str(original.get("From", "")), str(original.get("Message-ID", "")), artifacts)


def reports(handler: Handler, b: Bounce) -> list[NotifyRequest]:
    """One blocker-report per failed recipient, to the role whose mail bounced."""
    cfg, roster = handler.deliverer.config, handler.roster
    sender = roster.sender(b.original_from)
    out = []
    for f in b.failed:
        try:
            role = roster.sender(f.recipient)
        except RosterError:
            continue  # not a workflow address: nothing of ours to report
        host = roster.host_of(role) or "another host"
        out.append(
            NotifyRequest(
                "blocker-report",
                (b.artifacts[0] if b.artifacts else cfg.any_artifact,),
                (sender,),
                role,
                None,
                {
                    "BLOCKING_DETAILS": f"your mail {b.original_id} never reached {role} on host {host}: {f.diagnostic}",
                    "CONTEXT": f"host {cfg.this_host}'s relay kept it as long as it keeps mail for a host that is "
                    f"down ([workflow postfix] --queue-lifetime), then gave up; is host {host} running? Send it again once it is.",
                },
            )
        )
    return out


async def take(handler: Handler, raw: bytes) -> str:
    """Store a DSN from this host's relay as workflow mail; the SMTP reply."""
    b = read(raw)
    if b is None:
        return "550 5.6.0 a null sender (MAIL FROM:<>) carries a delivery status notification only"
    try:
        requests = reports(handler, b)
    except RosterError as e:
        return f"550 5.1.1 the bounced mail's sender is no role here: {e}"
    loop = asyncio.get_running_loop()
    stored = []
    for req in requests:
        try:
            c = await loop.run_in_executor(None, compose, req, handler.deliverer.config, handler.roster, lambda _: None)
            env = Envelope()
            env.mail_from, env.rcpt_tos = c.sender_address, list(c.recipients)
            plan = await handler._prepare(c.raw, env)
            if plan.mailboxes:
                await handler.committer.submit(plan)
            stored.append(req.sender)
        except WorkflowError as e:
            return f"550 5.6.0 the bounce could not be stored as workflow mail: {str(e)[:300]}"
    return f"250 2.0.0 bounce stored for {', '.join(stored) or 'no role'}"
