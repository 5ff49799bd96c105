"""Transport: hand a message to the local SMTP server, or deliver it directly when none answers.

Both paths end in ``Deliverer.deliver`` (the server calls it too), so the same input gives the
same result either way. The server is reached on its Unix socket in the state directory
(``delivery.local``), never on TCP, which is for people. ``auto`` falls back to direct delivery
only when no server listens there (no socket, or the connection is refused); a server that
answers and refuses — even ``421`` at the greeting — is a refusal, never a silent fallback.

Every SMTP submission logs in (``delivery.credentials``): inside a run (``$WORKFLOW_TOKEN``) with
the run's credential, to the socket run-role names (``$WORKFLOW_SMTP``), never directly — the
Maildirs are the owner's; anywhere else with the owner's credential, found without a word.
Either logs in with ``handshake``'s challenge-response: the secret never crosses the
connection, and nothing is sent to a server that cannot prove it holds it.
"""

from __future__ import annotations

import os
import smtplib
import socket
from collections.abc import Sequence
from typing import Protocol

from workflow.core import runmark
from workflow.core.config import Config
from workflow.core.errors import TransportError, WorkflowError
from workflow.delivery import handshake, local
from workflow.delivery.credentials import OWNER, Credential, client_credential
from workflow.delivery.deliverer import Deliverer
from workflow.mail.message import to_crlf


class Transport(Protocol):
    """Send one message; returns a short description of where it went."""

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str: ...


class DirectTransport:
    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        d = self.deliverer.deliver(raw, recipients)
        return "direct: " + ", ".join(d.mailboxes)


class LocalSMTP(smtplib.SMTP):
    """An SMTP client of the server's Unix socket (``delivery.local``)."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        super().__init__(local_hostname="workflow", timeout=timeout)  # no host: connected below
        code, text = self.connect("localhost", 25)  # _get_socket connects to the path
        if code != 220:
            self.close()
            raise smtplib.SMTPConnectError(code, text)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return local.connect(self.path, timeout)


class SmtpTransport:
    def __init__(
        self, path: str, timeout: float, credential: Credential | None = None, must_login: bool = True
    ) -> None:
        """The server listening on the Unix socket ``path``; ``must_login``: the project
        requires AUTH, so a server that offers none is not its own."""
        self.path, self.timeout = path, timeout
        self.credential = credential
        self.must_login = must_login

    def connect(self) -> smtplib.SMTP:
        return LocalSMTP(self.path, self.timeout)

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        try:
            smtp = self.connect()
        except OSError as e:
            raise TransportError(f"cannot reach the SMTP server's socket {self.path}: {e}{_start_it(e)}") from None
        return self.send_on(smtp, raw, sender, recipients)

    def send_on(self, smtp: smtplib.SMTP, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        # Not ``with smtp``: its exit sends QUIT even when an interrupt (SIGTERM, Ctrl-C) cut the
        # conversation short, reads a stale reply, and raises a "refusal" that hides the interrupt.
        accepted = False
        try:
            if self.credential is not None:
                self._login(smtp, self.credential)
            smtp.sendmail(sender, list(recipients), to_crlf(raw))  # a stored copy's LF: CRLF on the wire
            accepted = True
        except smtplib.SMTPRecipientsRefused as e:
            code, text = next(iter(e.recipients.values()))
            raise TransportError(f"SMTP server refused a recipient: {code} {_text(text)}", code) from None
        except smtplib.SMTPResponseException as e:
            raise TransportError(
                f"SMTP server refused the message: {e.smtp_code} {_text(e.smtp_error)}", e.smtp_code
            ) from None
        except (smtplib.SMTPException, OSError) as e:
            raise TransportError(f"SMTP conversation on {self.path} failed: {e}") from None
        finally:
            if accepted:
                try:
                    smtp.quit()
                except (smtplib.SMTPException, OSError):
                    pass  # the message was accepted: a failed goodbye changes nothing
            smtp.close()
        return f"smtp: {self.path}"

    def _login(self, smtp: smtplib.SMTP, credential: Credential) -> None:
        smtp.ehlo_or_helo_if_needed()
        if not smtp.has_extn("auth") and not self.must_login:
            return  # a server of trust-the-host mode offers no AUTH: nothing to prove, nothing to send
        try:
            login(smtp, credential.login, credential.secret)
        except handshake.LoginError as e:
            where = self.path
            if not e.proven:
                raise TransportError(
                    f"the SMTP server on {where} could not prove it is this project's workflow smtpd ({e}); "
                    "nothing was sent to it"
                ) from None
            what = f"the credential of the run of {credential.run_role}" if credential.run_role else credential.login
            why = (
                " — the owner's login is bound to this project's mail root: this server serves another one"
                if credential.login.startswith(OWNER)
                else ""
            )
            raise TransportError(f"SMTP server {where} refused {what}: {e}{why}", e.code) from None


def login(smtp: smtplib.SMTP, name: str, secret: str) -> None:
    """Log in to a workflow-mail server over ``smtp`` as the owner or a run (``handshake``:
    the secret is never sent, and the server proves it holds it); LoginError otherwise."""

    def command(line: str) -> tuple[int, str]:
        code, text = smtp.docmd(line)
        return code, _text(text)

    smtp.ehlo_or_helo_if_needed()
    handshake.login(command, name, secret)


class AutoTransport:
    """SMTP when the mail root's server listens, direct delivery when none does."""

    def __init__(self, smtp: SmtpTransport, direct: DirectTransport) -> None:
        self.smtp, self.direct = smtp, direct

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        where = self.smtp.path
        try:
            conn = self.smtp.connect()
        except (FileNotFoundError, ConnectionRefusedError):  # no server: the only case for delivering directly
            done = self.direct.send(raw, sender, recipients)
            return f"no server running; delivered directly: {done.split(': ', 1)[-1]}"
        except smtplib.SMTPResponseException as e:  # a server answered (421: busy): never "nobody there"
            raise TransportError(
                f"SMTP server {where} refused the connection: {e.smtp_code} {_text(e.smtp_error)}", e.smtp_code
            ) from None
        except OSError as e:
            raise TransportError(f"cannot talk to the SMTP server on {where}: {e}") from None
        return self.smtp.send_on(conn, raw, sender, recipients)


def _start_it(e: OSError) -> str:
    if isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
        return " (no server runs for this mail root: start `workflow smtpd`)"
    return ""


def _text(b: bytes | str) -> str:
    s = b.decode("utf-8", "replace") if isinstance(b, bytes) else b
    return s.replace("\r", " ").replace("\n", " ")


def make_transport(config: Config, deliverer: Deliverer, via: str = "auto") -> Transport:
    """How this process sends: ``smtp`` (the server's socket), ``direct`` (the owner writes the
    Maildirs) or ``auto``. Inside a run (its credential in the environment, or the sandbox's mark
    whatever the environment says: ``core.runmark``) only the server, with the run's credential."""
    if via not in ("auto", "smtp", "direct"):
        raise TransportError(f"--via {via!r}: expected smtp, direct or auto")
    sandboxed = runmark.no_direct_delivery()
    if via == "direct" and (sandboxed or os.environ.get("WORKFLOW_TOKEN")):
        raise TransportError(
            sandboxed or "inside a run, mail goes through the SMTP server (--via direct is the owner's)"
        )
    if sandboxed and not os.environ.get("WORKFLOW_TOKEN"):
        raise TransportError(f"{sandboxed}; $WORKFLOW_TOKEN is not set here")
    try:
        credential = client_credential(mail_root=config.mail_root) if via != "direct" else None
    except WorkflowError as e:
        raise TransportError(str(e)) from None
    if credential is not None and credential.run_role:
        path = os.environ.get("WORKFLOW_SMTP") or str(config.state.runs_socket)
        return SmtpTransport(path, config.smtp.timeout, credential)
    smtp = SmtpTransport(
        str(config.state.socket), config.smtp.timeout, credential, must_login=config.smtp.auth == "required"
    )
    if via == "smtp":
        return smtp
    direct = DirectTransport(deliverer)
    if via == "direct":
        return direct
    return AutoTransport(smtp, direct)
