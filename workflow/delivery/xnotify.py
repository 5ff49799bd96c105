"""XNOTIFY: the wire format of ``workflow-notify``'s request to the server, and of its answers.

The client (``delivery.submit``, for ``cli.fast``) and the server (``delivery.server.smtpd``) both use
this module only, so a field or a reply is written in one place: ``encode``/``decode`` carry a
``Request`` (event, artifacts, recipients, sender, In-Reply-To, KEY=VALUE pairs; NUL-separated
UTF-8, base64), ``accepted``/``read_accepted`` the server's ``250 2.0.0 <Message-ID> RCPT,…``.
DATA's own ``250`` replies are made here too (``delivered``, ``staged``), so the server can tell
(``stored``) whether the message it put through DATA for an XNOTIFY is in the Maildirs now.
Start-up time: this module imports ``binascii`` only (docs/performance.md).
"""

from __future__ import annotations

import binascii

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

COMMAND = "XNOTIFY"


class Request(NamedTuple):
    """A notification as ``workflow-notify`` was given it (``delivery.notify.request`` reads it)."""

    event: str
    artifact: str  # one or several, comma-separated
    to: str  # one or several, comma-separated
    sender: str
    in_reply_to: str = ""  # "": none
    pairs: tuple[str, ...] = ()  # KEY=VALUE


def encode(req: Request) -> str:
    """The argument of ``XNOTIFY`` carrying ``req``."""
    fields = (req.event, req.artifact, req.to, req.sender, req.in_reply_to, *req.pairs)
    return binascii.b2a_base64("\0".join(fields).encode("utf-8"), newline=False).decode("ascii")


def decode(arg: str) -> Request:
    """The request an ``XNOTIFY`` argument carries; ValueError when it is not one."""
    try:
        fields = binascii.a2b_base64(arg.strip().encode("ascii"), strict_mode=True).decode("utf-8").split("\0")
    except (binascii.Error, UnicodeError) as e:
        raise ValueError(f"XNOTIFY argument is not base64 of UTF-8 fields: {e}") from None
    if len(fields) < 5:
        raise ValueError(f"XNOTIFY argument has {len(fields)} fields; expected at least 5")
    event, artifact, to, sender, in_reply_to, *pairs = fields
    return Request(event, artifact, to, sender, in_reply_to, tuple(pairs))


def accepted(message_id: str, recipients: Sequence[str]) -> str:
    """The server's answer to an XNOTIFY it delivered."""
    return f"250 2.0.0 {message_id} {','.join(recipients)}"


def read_accepted(text: str) -> tuple[str, list[str]] | None:
    """The Message-ID and recipients of an ``accepted`` answer's text (after ``250 ``); None when
    it is not one."""
    parts = text.split(" ")
    if len(parts) != 3 or parts[0] != "2.0.0" or not parts[1].startswith("<"):
        return None
    return parts[1], parts[2].split(",")


def delivered(message_id: str, duplicate: bool = False) -> str:
    """DATA's answer when the message is in the Maildirs (or was already: a retry)."""
    return f"250 2.0.0 {message_id} delivered" + (" (duplicate of a stored copy)" if duplicate else "")


def staged(message_id: str, sender: str) -> str:
    """DATA's answer when a run's agent sent it: held in the run, delivered if the run succeeds."""
    return f"250 2.0.0 {message_id} staged: delivered when the run of {sender} succeeds"


def stored(reply: str) -> bool:
    """Whether DATA's ``reply`` says the message is in the Maildirs (``delivered``, not ``staged``
    and not a refusal)."""
    parts = reply.split(" ")
    return (
        parts[:2] == ["250", "2.0.0"] and parts[2:3] != [] and parts[2].startswith("<") and parts[3:4] == ["delivered"]
    )
