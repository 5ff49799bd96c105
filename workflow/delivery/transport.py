"""Transport: hand a message to the local SMTP server, or deliver it directly when none answers.

Both paths end in ``Deliverer.deliver`` (the server calls it too), so the same input gives the
same result either way. ``auto`` falls back to direct delivery only when nothing listens on the
configured port; a server that answers and refuses is a refusal, never a silent fallback.

Every SMTP submission logs in (``delivery.credentials``): inside a run (``$WORKFLOW_TOKEN``) with
the run's credential, to the server run-role names (``$WORKFLOW_SMTP``), never directly — the
Maildirs are the owner's; anywhere else with the owner's credential, found without a word.
"""

from __future__ import annotations

import os
import smtplib
from collections.abc import Sequence
from typing import Protocol

from workflow.core.config import Config
from workflow.core.errors import TransportError, WorkflowError
from workflow.delivery import address
from workflow.delivery.credentials import OWNER, Credential, client_credential
from workflow.delivery.deliverer import Deliverer


class Transport(Protocol):
    """Send one message; returns a short description of where it went."""

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str: ...


class DirectTransport:
    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        d = self.deliverer.deliver(raw, recipients)
        return "direct: " + ", ".join(d.mailboxes)


class SmtpTransport:
    def __init__(self, host: str, port: int, timeout: float, credential: Credential | None = None) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.credential = credential

    def connect(self) -> smtplib.SMTP:
        return smtplib.SMTP(self.host, self.port, timeout=self.timeout)

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        try:
            smtp = self.connect()
        except OSError as e:
            raise TransportError(f"cannot reach SMTP server {self.host}:{self.port}: {e}") from None
        return self.send_on(smtp, raw, sender, recipients)

    def send_on(self, smtp: smtplib.SMTP, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        # Not ``with smtp``: its exit sends QUIT even when an interrupt (SIGTERM, Ctrl-C) cut the
        # conversation short, reads a stale reply, and raises a "refusal" that hides the interrupt.
        accepted = False
        try:
            if self.credential is not None:
                self._login(smtp, self.credential)
            smtp.sendmail(sender, list(recipients), raw)
            accepted = True
        except smtplib.SMTPRecipientsRefused as e:
            code, text = next(iter(e.recipients.values()))
            raise TransportError(f"SMTP server refused a recipient: {code} {_text(text)}", code) from None
        except smtplib.SMTPResponseException as e:
            raise TransportError(
                f"SMTP server refused the message: {e.smtp_code} {_text(e.smtp_error)}", e.smtp_code
            ) from None
        except (smtplib.SMTPException, OSError) as e:
            raise TransportError(f"SMTP conversation with {self.host}:{self.port} failed: {e}") from None
        finally:
            if accepted:
                try:
                    smtp.quit()
                except (smtplib.SMTPException, OSError):
                    pass  # the message was accepted: a failed goodbye changes nothing
            smtp.close()
        return f"smtp: {self.host}:{self.port}"

    def _login(self, smtp: smtplib.SMTP, credential: Credential) -> None:
        smtp.ehlo_or_helo_if_needed()
        if not smtp.has_extn("auth"):
            return  # a server that offers no AUTH (an old one, or a bare relay): nothing to prove
        try:
            smtp.login(credential.login, credential.secret)
        except smtplib.SMTPAuthenticationError as e:
            what = f"the credential of the run of {credential.run_role}" if credential.run_role else credential.login
            why = (
                " — the owner's login is bound to this project's mail root, so this is likely another project's "
                "server on the same port: give each project its own [smtp] port"
                if credential.login.startswith(OWNER)
                else ""
            )
            raise TransportError(
                f"SMTP server {self.host}:{self.port} refused {what}: {e.smtp_code} {_text(e.smtp_error)}{why}",
                e.smtp_code,
            ) from None


class AutoTransport:
    """SMTP when the configured server answers, direct delivery when nothing listens."""

    def __init__(self, smtp: SmtpTransport, direct: DirectTransport) -> None:
        self.smtp, self.direct = smtp, direct

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        try:
            conn = self.smtp.connect()
        except (TimeoutError, ConnectionRefusedError, OSError):
            where = self.direct.send(raw, sender, recipients)
            return f"no server on {self.smtp.host}:{self.smtp.port}; delivered directly: {where.split(': ', 1)[-1]}"
        return self.smtp.send_on(conn, raw, sender, recipients)


def _text(b: bytes | str) -> str:
    s = b.decode("utf-8", "replace") if isinstance(b, bytes) else b
    return s.replace("\r", " ").replace("\n", " ")


def make_transport(config: Config, deliverer: Deliverer, via: str = "auto") -> Transport:
    if via not in ("auto", "smtp", "direct"):
        raise TransportError(f"--via {via!r}: expected smtp, direct or auto")
    try:
        credential = client_credential(mail_root=config.mail_root) if via != "direct" else None
    except WorkflowError as e:
        raise TransportError(str(e)) from None
    if credential is not None and credential.run_role:
        if via == "direct":
            raise TransportError("inside a run, mail goes through the SMTP server (--via direct is for the owner)")
        host, _, port = os.environ.get("WORKFLOW_SMTP", f"{config.smtp.host}:{config.smtp.port}").rpartition(":")
        return SmtpTransport(host, int(port), config.smtp.timeout, credential)
    host, port_ = address.server(config)  # where `workflow smtpd` really listens (it may have --port)
    smtp = SmtpTransport(host, port_, config.smtp.timeout, credential)
    if via == "smtp":
        return smtp
    direct = DirectTransport(deliverer)
    if via == "direct":
        return direct
    return AutoTransport(smtp, direct)
