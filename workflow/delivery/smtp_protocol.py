"""SMTP protocol: our subclass of aiosmtpd's ``SMTP`` — the one module that touches its internals.

aiosmtpd reads DATA one line at a time in Python and refuses long lines; we read to each
``.\\r\\n`` instead, allow long body lines, cap connections and parse the plain ``<a@b>`` path
without the email package. Doing so uses private parts of aiosmtpd, so they are named here
(``PRIVATE_METHODS``, ``PRIVATE_ATTRIBUTES``), ``missing_private_api`` says which of them an
installed aiosmtpd lacks (a test calls it), and pyproject.toml pins aiosmtpd below 1.5.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any, Literal, Protocol

from aiosmtpd.smtp import SMTP

# <dot-atom@domain> with an optional tail of ESMTP parameters: the common case of MAIL and RCPT.
SIMPLE_PATH = re.compile(
    r"^\s*<([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>(.*)$"
)
# Private members of aiosmtpd.smtp.SMTP this module relies on (checked by missing_private_api):
# methods, and the stream attributes ``_cb_client_connected`` sets.
PRIVATE_METHODS = (
    "_set_post_data_state",
    "_call_handler_hook",
    "_getaddr",
    "_cb_client_connected",
    "_reset_timeout",
    "_timeout_cb",
)
PRIVATE_ATTRIBUTES = ("_reader", "_writer")
# ... and the idle timer's attributes, which ``__init__`` sets
PRIVATE_INIT_ATTRIBUTES = ("_timeout_handle", "_timeout_duration")


AUTH_REQUIRED = (
    "530 5.7.0 Authentication required: workflow commands log in by themselves; "
    "a mail client logs in with its [smtp] auth_users_file login"
)


COMMAND_BUFFER = 64 * 1024  # what a connection may buffer while reading a command line
ANSWERING, EOF_WHILE_ANSWERING = "_workflow_answering", "_workflow_eof_while_answering"


Admission = Literal["serve", "full", "moved"]


class Gate(Protocol):
    """What the protocol asks of each new connection before it greets it: serve it, refuse it
    (``cap`` connections are open: this process's or all workers', ``tally.Tally``), or it has
    been moved to another worker (``workers.Balancer``); ``release`` when a served one closes."""

    def admit(self, cap: int, transport: Any) -> Admission: ...

    def release(self) -> None: ...


def missing_private_api(smtp: type = SMTP) -> list[str]:
    """The private aiosmtpd members we use that ``smtp`` (the installed aiosmtpd's SMTP) lacks."""
    missing = [name for name in PRIVATE_METHODS if not callable(getattr(smtp, name, None))]
    try:
        source = inspect.getsource(smtp._cb_client_connected)  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        source = ""
    try:
        init = inspect.getsource(vars(smtp)["__init__"])
    except (KeyError, OSError, TypeError):
        init = ""
    return (
        missing
        + [name for name in PRIVATE_ATTRIBUTES if f"self.{name} =" not in source]
        + [name for name in PRIVATE_INIT_ATTRIBUTES if f"self.{name}" not in init]
    )


async def read_data(proto: SMTP, arg: str, limit: int) -> None:
    """DATA for our server: the same protocol as aiosmtpd's, read by terminator, not by line.

    Reads up to each ``.\\r\\n`` and checks whether it ends a line that is only a dot — the one
    terminator RFC 5321 allows, so a bare ``\\n.\\r\\n`` ends nothing (the handler then refuses the
    bare LF). Dot-stuffing is undone exactly as aiosmtpd does (the first dot of every line that
    starts with one). Beyond ``limit`` the rest is drained to the terminator and ``552`` sent, as
    RFC 5321 4.2.5 implies.
    """
    if await proto.check_helo_needed():
        return
    if await proto.check_auth_needed("DATA"):
        return
    assert proto.envelope is not None
    if not proto.envelope.rcpt_tos:
        await proto.push("503 Error: need RCPT command")
        return
    if arg:
        await proto.push("501 Syntax: DATA")
        return
    await proto.push("354 End data with <CR><LF>.<CR><LF>")
    reader = proto._reader
    chunks: list[bytes] = []
    size = 0
    too_big = False
    prev_tail = b"\r\n"  # the data starts at the beginning of a line
    while True:
        try:
            chunk = await reader.readuntil(b".\r\n")
        except asyncio.LimitOverrunError as e:
            chunk = await reader.read(e.consumed)  # no terminator within the reader's buffer yet
        except asyncio.IncompleteReadError:
            proto._writer.close()  # the client went away in the middle of the data
            return
        size += len(chunk)
        if not too_big:
            if size > limit + 3:
                too_big = True
                chunks.clear()
            else:
                chunks.append(chunk)
        if chunk.endswith(b".\r\n"):
            before = (prev_tail + chunk[:-3])[-2:]
            if before == b"\r\n":
                break
        prev_tail = (prev_tail + chunk)[-2:]
    if too_big:
        await proto.push("552 5.3.4 message larger than the size limit")
        proto._set_post_data_state()  # type: ignore[no-untyped-call]
        return
    data = b"".join(chunks)[:-3]  # without the final ".\r\n"; the CRLF before it ends the last line
    if b"\r\n." in data or data.startswith(b"."):
        data = (b"\r\n" + data).replace(b"\r\n.", b"\r\n")[2:]
    proto.envelope.content = data
    proto.envelope.original_content = data
    setattr(proto, ANSWERING, True)  # a half-close from now on must still get its reply (eof_received)
    try:
        status = await proto._call_handler_hook("DATA")
        proto._set_post_data_state()  # type: ignore[no-untyped-call]
        await proto.push(status)
    finally:
        setattr(proto, ANSWERING, False)
    if getattr(proto, EOF_WHILE_ANSWERING, False):
        proto._reader.feed_eof()  # the client had closed its side: the reply is out, end here
        if proto.transport is not None:
            proto.transport.close()


class QuietLoginData(logging.Filter):
    """aiosmtpd logs a deprecation warning of its own API on every successful AUTH: drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "login_data is deprecated" not in record.getMessage()


def quiet_aiosmtpd_log() -> None:
    """aiosmtpd logs every command at INFO; our one line per message is the log that matters."""
    logger = logging.getLogger("mail.log")
    logger.setLevel(logging.WARNING)
    if not any(isinstance(f, QuietLoginData) for f in logger.filters):
        logger.addFilter(QuietLoginData())


def protocol_factory(
    handler: object,
    *,
    max_message_size: int,
    max_connections: int,
    gate: Gate,
    protocols: set[SMTP],
    require_auth: bool = False,
    **smtp_options: Any,
) -> Callable[[], SMTP]:
    """A factory of connections for ``loop.create_server``: aiosmtpd's SMTP with our DATA
    reader, our address fast path, no per-line cap, a connection cap, and AUTH required without
    TLS on loopback (aiosmtpd's own ``auth_required`` warns on every connection that way)."""

    class WorkflowSMTP(SMTP):
        # The stream's buffer limit. Command lines are refused past RFC 5321's lengths (aiosmtpd's
        # command_size_limits) and, being read against this limit, never buffer more than it;
        # DATA is read against it too, in pieces, and may be as long as the message size limit.
        line_length_limit = COMMAND_BUFFER
        _workflow_active = 0.0  # the loop's time of the last command (the idle timer's reference)
        _workflow_idle_check: asyncio.TimerHandle | None = None  # our idle timer, when it is set

        def connection_made(self, transport: Any) -> None:
            admission = gate.admit(max_connections, transport)
            self._over_cap = admission != "serve"
            if admission == "moved":  # another process serves it now: close our descriptor only
                transport.abort()
                return
            if admission == "full":
                transport.write(b"421 4.7.0 too many connections; try again later\r\n")
                transport.close()
                return
            protocols.add(self)
            super().connection_made(transport)

        def connection_lost(self, error: Exception | None) -> None:
            if getattr(self, "_over_cap", True):
                return
            gate.release()
            protocols.discard(self)
            super().connection_lost(error)

        async def smtp_DATA(self, arg: str) -> None:
            await read_data(self, arg, max_message_size)

        async def smtp_XNOTIFY(self, arg: str) -> None:
            # A notification for the server to compose (delivery.submit): after AUTH, outside a
            # mail transaction; the handler checks and delivers it as it would the message itself.
            if await self.check_auth_needed("XNOTIFY"):
                return
            assert self.envelope is not None
            if self.envelope.mail_from is not None:
                await self.push("503 5.5.1 XNOTIFY inside a mail transaction; RSET first")
                return
            await self.push(await self._call_handler_hook("XNOTIFY", arg or ""))

        def eof_received(self) -> bool | None:
            # aiosmtpd cancels the session on EOF, so a client that half-closes after the final
            # dot never hears the 250 of a message that was stored: let the answer go out first.
            if getattr(self, ANSWERING, False):
                setattr(self, EOF_WHILE_ANSWERING, True)
                return True
            return super().eof_received()

        async def check_auth_needed(self, caller_method: str) -> bool:
            assert self.session is not None
            if require_auth and not self.session.authenticated:
                await self.push(AUTH_REQUIRED)
                return True
            return False

        def _reset_timeout(self, duration: float | None = None) -> None:
            # aiosmtpd replaces its idle timer at every command (a cancel and a new timer each
            # time); we note when the connection was last active, and one timer per idle period
            # checks that and sets itself again for what is left.
            if duration is not None:  # a one-off duration (the PROXY handshake): aiosmtpd's way
                super()._reset_timeout(duration)
                return
            loop = self.loop
            self._workflow_active = loop.time()
            handle = self._timeout_handle
            if handle is None or handle.cancelled() or handle is not self._workflow_idle_check:
                if handle is not None:
                    handle.cancel()
                handle = loop.call_later(self._timeout_duration, self._idle_check)
                self._timeout_handle = self._workflow_idle_check = handle

        def _idle_check(self) -> None:
            idle = self.loop.time() - self._workflow_active
            if idle >= self._timeout_duration:
                self._timeout_cb()  # type: ignore[no-untyped-call]
                return
            handle = self.loop.call_later(self._timeout_duration - idle, self._idle_check)
            self._timeout_handle = self._workflow_idle_check = handle

        def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
            # The plain <local@domain> form every workflow client sends, without the email
            # package's general header parser; anything else takes aiosmtpd's own path.
            m = SIMPLE_PATH.match(arg)
            if m:
                return m.group(1), m.group(2)
            return super()._getaddr(arg)

    def make() -> SMTP:
        smtp = WorkflowSMTP(handler, data_size_limit=max_message_size, **smtp_options)
        # aiosmtpd keeps these limits on the class; a request carries its KEY=VALUE text
        smtp.command_size_limits = collections.defaultdict(lambda: SMTP.command_size_limit, XNOTIFY=COMMAND_BUFFER)
        return smtp

    return make
