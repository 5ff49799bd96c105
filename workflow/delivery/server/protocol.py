"""SMTP protocol: our subclass of aiosmtpd's ``SMTP`` — the one module that touches its internals.

aiosmtpd reads DATA one line at a time in Python and refuses long lines; we read to each
``.\\r\\n`` instead, allow long body lines, cap connections and parse the plain ``<a@b>`` path
without the email package. Doing so uses private parts of aiosmtpd, so they are named here
(``PRIVATE_METHODS``, ``PRIVATE_ATTRIBUTES``), ``missing_private_api`` says which of them an
installed aiosmtpd lacks (a test calls it), and pyproject.toml pins aiosmtpd below 1.5.
"""

from __future__ import annotations

import asyncio
import binascii
import collections
import inspect
import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar

from aiosmtpd.smtp import MISSING, SMTP, AuthResult

from workflow.delivery import handshake
from workflow.delivery.credentials import Identity
from workflow.delivery.local import peer_uid as local_peer_uid
from workflow.delivery.server.logins import MAX_FAILURES, Logins
from workflow.delivery.server.refusals import LOCAL, peer_of, refused

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


T = TypeVar("T")

TOO_MANY_FAILURES = f"421 4.7.0 {MAX_FAILURES} failed logins: closing the connection"
LOGIN_LATE = "421 4.7.0 no login in time: closing the connection"
EVICTED = "421 4.7.0 too many connections waiting to log in: this one is closed for a newer one"


PER_RUN = 8  # connections one run's login may hold at once on the local socket
COMMAND_BUFFER = 64 * 1024  # what a connection may buffer while reading a command line
ANSWERING, EOF_WHILE_ANSWERING = "_workflow_answering", "_workflow_eof_while_answering"


Admission = Literal["serve", "full", "moved"]


class Gate(Protocol):
    """What the protocol asks of each new connection before it greets it: serve it, refuse it
    (``cap`` connections are open: this process's or all workers', ``tally.Tally``), or it has
    been moved to another worker (``balance.Balancer``); ``release`` when a served one closes."""

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
        assert proto.session is not None
        identity = proto.session.auth_data if proto.session.authenticated else None
        await proto.push(
            refused(
                "DATA",
                peer_of(proto.session.peer),
                identity.login if isinstance(identity, Identity) else None,
                "552 5.3.4 message larger than the size limit",
            )
        )
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
    logins: Logins | None = None,
    require_auth: bool = False,
    login_timeout: float = 10.0,
    local: bool = False,
    **smtp_options: Any,
) -> Callable[[], SMTP]:
    """A factory of connections for ``loop.create_server``: aiosmtpd's SMTP with our DATA
    reader, our address fast path, no per-line cap, a connection cap, and AUTH required without
    TLS on loopback (aiosmtpd's own ``auth_required`` warns on every connection that way).

    Logins (``logins``) are checked off the event loop, slowed and counted (``logins``); the
    owner's and runs' ``X-WORKFLOW`` login is offered (``handshake``). With AUTH required, a
    connection must log in within ``login_timeout`` seconds, and when the cap is reached a new
    connection takes the slot of the oldest one still waiting to log in: connections that never
    log in cannot keep the owner out.

    ``local``: connections on the Unix socket (``delivery.local``): only from processes of this
    server's uid, and a run's login holds at most ``PER_RUN`` of them at once, so no run's agent
    can fill the cap and keep the owner out."""

    class WorkflowSMTP(SMTP):
        # The stream's buffer limit. Command lines are refused past RFC 5321's lengths (aiosmtpd's
        # command_size_limits) and, being read against this limit, never buffer more than it;
        # DATA is read against it too, in pieces, and may be as long as the message size limit.
        line_length_limit = COMMAND_BUFFER
        _workflow_active = 0.0  # the loop's time of the last command (the idle timer's reference)
        _workflow_idle_check: asyncio.TimerHandle | None = None  # our idle timer, when it is set
        _workflow_served = False  # greeted (not refused at the cap, not moved to another worker)
        _workflow_slot = False  # holds a slot of the cap (an evicted connection gave its own away)
        _workflow_since = 0.0  # the loop's time it was served
        _workflow_failures = 0  # failed logins on this connection
        _workflow_deadline: asyncio.TimerHandle | None = None  # closes it when it has not logged in

        def connection_made(self, transport: Any) -> None:
            if local and local_peer_uid(transport.get_extra_info("socket")) not in (os.getuid(), None):
                transport.write(b"421 4.7.0 this socket is for the owner of the mail root\r\n")
                transport.close()
                return
            admission = gate.admit(max_connections, transport)
            if admission == "moved":  # another process serves it now: close our descriptor only
                transport.abort()
                return
            if admission == "full" and not (require_auth and self._workflow_evict()):
                transport.write(b"421 4.7.0 too many connections; try again later\r\n")
                transport.close()
                return
            self._workflow_served = self._workflow_slot = True
            protocols.add(self)
            super().connection_made(transport)
            self._workflow_since = self.loop.time()
            if require_auth:
                self._workflow_deadline = self.loop.call_later(login_timeout, self._workflow_login_late)

        def connection_lost(self, error: Exception | None) -> None:
            if not self._workflow_served:
                return
            if self._workflow_slot:
                gate.release()
            if self._workflow_deadline is not None:
                self._workflow_deadline.cancel()
            protocols.discard(self)
            super().connection_lost(error)

        def _workflow_waiting(self) -> bool:
            """Connected, not logged in, not in a mail transaction."""
            session, envelope = self.session, self.envelope
            return (
                self._workflow_slot
                and (session is None or not session.authenticated)
                and (envelope is None or envelope.mail_from is None)
            )

        def _workflow_evict(self) -> bool:
            """Close the oldest connection of this process still waiting to log in, and take its slot."""
            waiting = [p for p in protocols if isinstance(p, WorkflowSMTP) and p._workflow_waiting()]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda p: p._workflow_since)
            oldest._workflow_slot = False  # its slot is the newcomer's now: its close releases nothing
            oldest._workflow_close(EVICTED)
            return True

        def _workflow_close(self, reply: str) -> None:
            transport: Any = self.transport
            if transport is not None and not transport.is_closing():
                if reply:
                    transport.write(reply.encode("ascii") + b"\r\n")
                transport.close()

        def _workflow_login_late(self) -> None:
            if self.session is None or not self.session.authenticated:
                self._workflow_close(LOGIN_LATE)

        # -- AUTH: PLAIN and LOGIN as aiosmtpd parses them, checked by ``logins``; X-WORKFLOW

        def _workflow_peer(self) -> str:
            if local:
                return LOCAL
            return peer_of(self.session.peer if self.session is not None else None)

        def _workflow_failure_code(self) -> int:
            """The reply the next failed login on this connection gets: 535, or 421 for the last."""
            return 421 if self._workflow_failures + 1 >= MAX_FAILURES else 535

        async def _workflow_outcome(self, identity: Identity | None, message: str | None = None) -> AuthResult:
            if identity is not None and identity.run is not None and self._workflow_runs(identity) >= PER_RUN:
                await self.push(f"421 4.7.0 {identity.login} holds {PER_RUN} connections already; close one first")
                self._workflow_close("")
                return AuthResult(success=False, handled=True)
            if identity is not None:
                if self._workflow_deadline is not None:
                    self._workflow_deadline.cancel()
                return AuthResult(success=True, auth_data=identity, message=message)
            self._workflow_failures += 1
            if self._workflow_failures >= MAX_FAILURES:
                await self.push(TOO_MANY_FAILURES)
                self._workflow_close("")
                return AuthResult(success=False, handled=True)
            return AuthResult(success=False, handled=False)  # aiosmtpd answers 535

        def _workflow_runs(self, identity: Identity) -> int:
            """Connections of this process logged in as ``identity`` now."""
            return sum(
                1
                for p in protocols
                if p.session is not None and p.session.authenticated and p.session.auth_data == identity
            )

        async def smtp_AUTH(self, arg: str) -> None:
            await super().smtp_AUTH(arg)
            # the client half-closed while its login was checked (eof_received waited for the answer):
            # with nothing more of it to read, end here, as after DATA
            if getattr(self, EOF_WHILE_ANSWERING, False) and not getattr(self._reader, "_buffer", b""):
                self._reader.feed_eof()
                self._workflow_close("")

        async def _workflow_checking(self, check: Awaitable[T]) -> T:
            """Await a login check (a thread, a failure's delay); a half-close meanwhile waits for its answer."""
            setattr(self, ANSWERING, True)
            try:
                return await check
            finally:
                setattr(self, ANSWERING, False)

        async def _workflow_password(self, mechanism: str, login: bytes, secret: bytes) -> AuthResult:
            if logins is None:
                return AuthResult(success=False, handled=False)
            identity = await self._workflow_checking(
                logins.check(
                    self._workflow_peer(),
                    mechanism,
                    login.decode("utf-8", "replace"),
                    secret.decode("utf-8", "replace"),
                    self._workflow_failure_code(),
                )
            )
            return await self._workflow_outcome(identity)

        async def _workflow_b64(self, arg: str) -> bytes | None:
            try:
                return binascii.a2b_base64(arg.encode("ascii"), strict_mode=True)
            except (binascii.Error, UnicodeError, ValueError):
                await self.push("501 5.5.2 Can't decode base64")
                return None

        async def auth_PLAIN(self, _: Any, args: list[str]) -> AuthResult:
            data: Any = await self.challenge_auth("") if len(args) == 1 else await self._workflow_b64(args[1])
            if not isinstance(data, bytes):  # aborted, or not base64: answered already
                return AuthResult(success=False, handled=True)
            parts = data.split(b"\0")  # authzid NUL login NUL password (RFC 4616)
            if len(parts) != 3:
                await self.push("501 5.5.2 Can't split auth value")
                return AuthResult(success=False, handled=True)
            return await self._workflow_password("PLAIN", parts[1], parts[2])

        async def auth_LOGIN(self, _: Any, args: list[str]) -> AuthResult:
            login: Any = (
                await self.challenge_auth(self.AuthLoginUsernameChallenge)
                if len(args) == 1
                else await self._workflow_b64(args[1]) or MISSING
            )
            if login is MISSING:
                return AuthResult(success=False, handled=True)
            password = await self.challenge_auth(self.AuthLoginPasswordChallenge)
            if password is MISSING:
                return AuthResult(success=False, handled=True)
            assert isinstance(login, bytes) and isinstance(password, bytes)
            return await self._workflow_password("LOGIN", login, password)

        async def auth_X__WORKFLOW(self, _: Any, args: list[str]) -> AuthResult:
            data = await self._workflow_b64(args[1]) if len(args) == 2 else None
            fields = data.decode("utf-8", "replace").split(" ") if data is not None else []
            if len(fields) != 2 or logins is None:
                if data is not None or len(args) != 2:
                    await self.push(f"501 5.5.2 {handshake.MECHANISM} takes base64 of 'LOGIN NONCE'")
                return AuthResult(success=False, handled=True)
            login, nonce = fields
            ours = logins.challenge()
            answer = await self.challenge_auth(ours)
            if answer is MISSING:
                return AuthResult(success=False, handled=True)
            assert isinstance(answer, bytes)
            proven = await self._workflow_checking(
                logins.prove(
                    self._workflow_peer(),
                    login,
                    nonce,
                    ours,
                    answer.decode("ascii", "replace").strip(),
                    self._workflow_failure_code(),
                )
            )
            if proven is None:
                return await self._workflow_outcome(None)
            return await self._workflow_outcome(proven.identity, f"235 2.7.0 Authentication successful {proven.answer}")

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
            identity = self.session.auth_data if self.session.authenticated else None
            if isinstance(identity, Identity) and logins is not None and not logins.current(identity):
                # a login removed (or its password or roles changed) since this connection made it
                self.session.authenticated, self.session.auth_data = False, None
                reply = f"530 5.7.0 login {identity.login} is no longer valid (the users file changed); log in again"
                refused(caller_method, self._workflow_peer(), identity.login, reply)
                await self.push(reply)
                return True
            if require_auth and not self.session.authenticated:
                if logins is not None:  # logged, and slowed like a failed login: no retry storm
                    await logins.unauthenticated(self._workflow_peer(), caller_method, AUTH_REQUIRED)
                else:
                    refused(caller_method, self._workflow_peer(), None, AUTH_REQUIRED)
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
