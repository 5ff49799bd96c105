"""SMTP server: accept workflow mail on loopback, validate and persist it — nothing else.

Runs aiosmtpd with a handler that hands every message to ``Deliverer`` (the same checks as direct
delivery) and answers ``250`` only after every copy and its directory are fsynced. Policies:

* RCPT: the roster decides — unknown local address ``550 5.1.1`` naming the nearest ones; a
  non-member to a panel-internal address ``550 5.7.1``; other domains ``550 5.7.1 relaying denied``.
* AUTH (``delivery.credentials``): with ``[smtp] auth = "required"`` (the default) nothing is
  accepted before AUTH (``530 5.7.0``); the login decides which roles MAIL FROM may name
  (``550 5.7.1 sender-identity: …``). Mail submitted with a run's credential is checked like any
  other and then *staged* in that run (``delivery.staging``), delivered only if the run succeeds.
  A non-loopback listener needs STARTTLS (``tls_cert``, ``tls_key``) and AUTH only after it.
* MAIL FROM is a workflow identity, From: the same (``<>`` from this host's relay only: ``bounces``);
  other hosts' copies go to its Postfix before ``250``, a peer relays its roles' mail only (``relay``).
* DATA: invalid workflow headers ``550 5.6.0``; visibility or guardrail refusals ``550 5.7.1``;
  over ``max_message_size`` ``552 5.3.4``; bare CR or LF ``550 5.6.0`` (one message per DATA — no
  SMTP smuggling through ``\\n.\\r\\n``). A full disk is ``452 4.3.1`` (one log line naming the
  file system); any other failure inside the handler (EACCES, a bug) is ``451 4.3.0`` with no
  exception text, so clients retry instead of bouncing; nothing is left in any new/.
* Body lines over 998 octets are stored as received, as Postfix does; header lines are ``550 5.6.0``.
* A connection cap (``421 4.7.0``), an idle timeout per command that also bounds a whole DATA phase;
  a retried message (same Message-ID and bytes) after a lost ``250`` is recognised, not stored twice.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import threading
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from workflow.core import diskfull, modes
from workflow.core.config import Config
from workflow.core.errors import (
    ConfigError,
    GuardrailError,
    MessageError,
    RosterError,
    RuleError,
    ToolError,
    TransportError,
    WorkflowError,
)
from workflow.delivery import address, handshake, local, relay, xnotify
from workflow.delivery.credentials import Authenticator, Identity, Users, UsersFile, root_id
from workflow.delivery.deliverer import Deliverer, IndexLagError, Plan
from workflow.delivery.notify import compose, parent_in, request
from workflow.delivery.server import bounces
from workflow.delivery.server.commit import Committer, Peers
from workflow.delivery.server.current import Current
from workflow.delivery.server.gossip import Either, NoOthers, Others
from workflow.delivery.server.listeners import is_loopback, tls_context
from workflow.delivery.server.logins import Logins
from workflow.delivery.server.protocol import protocol_factory, quiet_aiosmtpd_log
from workflow.delivery.server.refusals import Counted, peer_of, refused, sanitize, split
from workflow.delivery.server.tally import Tally
from workflow.delivery.staging import RunBox, describe
from workflow.mail.index import Index
from workflow.mail.maildir import Entry, Maildirs
from workflow.mail.message import parse
from workflow.policy.guardrails import SENDER_MATCHES_ENVELOPE
from workflow.policy.roster import Roster

try:
    import uvloop

    LOOP_FACTORY: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
except ImportError:  # uvloop is a dependency on Linux only; elsewhere asyncio's own loop serves
    LOOP_FACTORY = asyncio.new_event_loop

log = logging.getLogger(__name__)


def _one_line(e: Exception) -> str:
    return str(e).replace("\r", " ").replace("\n", " ")


SENDER_IDENTITY = "sender-identity"


def identity_of(session: Session) -> Identity | None:
    """Who the connection logged in as (None: it did not)."""
    data = getattr(session, "auth_data", None)
    return data if getattr(session, "authenticated", False) and isinstance(data, Identity) else None


def refuse(command: str, session: Session, reply: str, rule: str = "") -> str:
    """Log a refusal of ``command`` on this connection (``refusals``) and return its reply."""
    identity = identity_of(session)
    return refused(command, peer_of(session.peer), identity.login if identity else None, reply, rule)


LAG_ROUNDS = 3  # waits for the index before a message naming fresh copies is answered 451


class Handler:
    """aiosmtpd hooks: roster at MAIL/RCPT, Deliverer at DATA."""

    def __init__(
        self,
        deliverer: Deliverer,
        index: Index,
        committer: Committer,
        stats: Tally,
        others: Others | None = None,
        current: Current | None = None,
    ) -> None:
        self.deliverer = deliverer
        self.current = current  # reloads the config and roster when their files change
        self.index = index
        self.committer = committer
        self.stats = stats
        self.others = others or NoOthers()
        self.known = Either(committer.known, self.others.told)

    @property
    def roster(self) -> Roster:
        return self.deliverer.roster

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.current is not None:
            self.current.refresh()  # every transaction meets the roster its files hold now
        if address in ("", "<>"):  # a bounce (MAIL FROM:<>): this host's own relay's only
            if why := relay.not_bounce(self.deliverer.config, identity_of(session)):
                return refuse("MAIL", session, f"550 5.7.1 {why}")  # no transaction: no sender set
            envelope.mail_from = "<>"  # aiosmtpd takes an empty one for no MAIL at all
            return "250 2.1.0 OK"
        try:
            role = self.roster.sender(address)
        except RosterError as e:
            return refuse("MAIL", session, f"550 5.7.1 {_one_line(e)}")
        identity = identity_of(session)
        if identity is not None and identity.peer:  # another host's Postfix: the mail of its own roles
            why = relay.not_from(self.roster, identity, role)
            if why:
                return refuse("MAIL", session, f"550 5.7.1 {SENDER_IDENTITY}: {why}", SENDER_IDENTITY)
        elif identity is not None and not identity.may_send_as(role):
            reply = f"550 5.7.1 {SENDER_IDENTITY}: {identity.describe()}, not {role}"
            return refuse("MAIL", session, reply, SENDER_IDENTITY)
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        try:
            route = self.roster.route(address)
        except RosterError as e:
            return refuse("RCPT", session, f"550 5.1.1 {_one_line(e)}")
        if route.kind == "external" and not route.mailboxes:
            return refuse(
                "RCPT",
                session,
                f"550 5.7.1 relaying denied: {route.address} is outside {self.roster.domain} and no outbound bridge is configured",
            )
        identity = identity_of(session)
        if identity is not None and identity.peer:  # a peer delivers here, never through here
            why = relay.not_to(self.deliverer.config, self.roster, route)
            if why:
                return refuse("RCPT", session, f"550 5.7.1 relaying denied: {why}")
        if envelope.mail_from == "<>":  # a bounce, to this host's roles (checked above): the report is checked at DATA
            envelope.rcpt_tos.append(address)
            return "250 2.1.5 OK"
        sender = self.roster.sender(envelope.mail_from or "")
        decision = self.roster.may_send(sender, route)
        if not decision.allowed:
            return refuse("RCPT", session, f"550 5.7.1 rule {decision.rule}: {decision.reason}", decision.rule)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        peer = sanitize(session.peer)
        mid = "-"
        self.stats.in_flight += 1
        try:
            crlf = raw.count(b"\r\n")
            if raw.count(b"\n") != crlf or raw.count(b"\r") != crlf:  # a bare LF or CR somewhere
                raise MessageError("message contains a bare CR or LF; SMTP lines must end in CRLF")
            if envelope.mail_from == "<>" and not relay.not_bounce(self.deliverer.config, identity_of(session)):
                return await bounces.take(self, raw)
            identity = identity_of(session)
            person = identity is not None and identity.person
            plan = await self._prepare(raw, envelope, person)
            mid = plan.message_id
            from_header = self.roster.sender(envelope.mail_from or "")
            if plan.sender != from_header:
                raise GuardrailError(
                    SENDER_MATCHES_ENVELOPE.name,
                    f"From: is {plan.sender} but MAIL FROM is {from_header}; they must agree",
                )
            if identity is not None and identity.run is not None:
                return self._stage(identity.run, plan, session, envelope, from_header)
            left = relay.onward(self.deliverer.config, self.roster, plan.raw, envelope.mail_from or "", plan.mailboxes)
            plan = plan._replace(mailboxes=await left)
            if plan.mailboxes:
                await self.committer.submit(plan)
        except TransportError as e:
            log.warning("%s from %s: %s; answered 451", mid, sanitize(envelope.mail_from), _one_line(e))
            return f"451 4.4.1 {_one_line(e)[:400]}; nothing was delivered, try again later"
        except MessageError as e:
            return self._refuse(mid, raw, session, envelope, f"550 5.6.0 {_one_line(e)}")
        except RuleError as e:  # visibility and guardrails: the rule that refused is named
            return self._refuse(mid, raw, session, envelope, f"550 5.7.1 {_one_line(e)}", e.rule)
        except RosterError as e:
            return self._refuse(mid, raw, session, envelope, f"550 5.1.1 {_one_line(e)}")
        except Exception as e:
            self.stats.failed += 1
            if diskfull.is_full(e):
                waits = "answered 452, the client retries"
                log.warning(
                    "%s from %s: %s",
                    mid,
                    sanitize(envelope.mail_from),
                    diskfull.line(e, self.deliverer.maildirs.root, waits),
                )
                return "452 4.3.1 insufficient system storage; nothing was delivered, try again later"
            log.exception(
                "%s from %s (peer %s): delivery failed; answered 451", mid, sanitize(envelope.mail_from), peer
            )
            return "451 4.3.0 temporary failure storing the message; nothing was delivered, try again later"
        finally:
            self.stats.in_flight -= 1
        self.stats.delivered += 1
        where = ", ".join(plan.mailboxes) or "-"
        note = f" (already in {', '.join(plan.already)})" if plan.already else ""
        log.info(
            "%s from %s to %s: delivered to %s%s",
            mid,
            sanitize(envelope.mail_from),
            sanitize(",".join(envelope.rcpt_tos)),
            where,
            note,
        )
        return xnotify.delivered(mid, duplicate=not plan.mailboxes)

    async def handle_XNOTIFY(self, server: SMTP, session: Session, envelope: Envelope, arg: str) -> str:
        """Compose a notification here (``delivery.submit``: workflow-notify's fast path) as the
        command would, then check and deliver it as any message: MAIL, each RCPT, DATA."""
        try:
            fields = xnotify.decode(arg)
        except ValueError as e:
            return refuse("XNOTIFY", session, f"501 5.5.4 {_one_line(e)}")
        if self.current is not None:
            self.current.refresh()
            if self.current.problem is not None:  # the command runs in full and says what is wrong
                reply = f"451 4.3.0 the changed config cannot be loaded: {self.current.problem[:400]}"
                return refuse("XNOTIFY", session, reply)
        event = fields.event
        limit = self.deliverer.config.smtp.render_timeout
        try:
            req = request(event, fields.artifact, fields.to, fields.sender, fields.in_reply_to, fields.pairs)
            parent = None
            if req.in_reply_to:  # the parent may have been stored a moment ago, here or by another worker
                await self._indexed([req.in_reply_to])
                parent = parent_in(self.index)(req.in_reply_to)
            composed = await asyncio.wait_for(  # the template renders off the loop, for a bounded time
                asyncio.get_running_loop().run_in_executor(
                    None, compose, req, self.deliverer.config, self.roster, lambda _: parent
                ),
                limit,
            )
        except WorkflowError as e:
            return refuse("XNOTIFY", session, f"550 5.6.0 {_one_line(e)}", getattr(e, "rule", ""))
        except TimeoutError:
            log.warning("XNOTIFY %r: the template took longer than %g s to render: refused", event[:80], limit)
            return f"451 4.3.0 composing the notification took longer than {limit:g} s ([smtp] render_timeout)"
        mail = Envelope()
        reply = await self.handle_MAIL(server, session, mail, composed.sender_address, [])
        for rcpt in composed.recipients:
            if reply.startswith("250"):
                reply = await self.handle_RCPT(server, session, mail, rcpt, [])
        if not reply.startswith("250"):
            return reply
        mail.original_content = composed.raw
        reply = await self.handle_DATA(server, session, mail)
        if not xnotify.stored(reply):
            return reply
        return xnotify.accepted(composed.message_id, composed.recipients)

    async def _prepare(self, raw: bytes, envelope: Envelope, person: bool = False) -> Plan:
        """``Deliverer.prepare`` against the index and every copy stored but not yet indexed, by
        this process or another worker; a message that refers to such copies waits for them."""
        for attempt in range(LAG_ROUNDS):
            own, others = self.committer.unindexed, self.others.stored()
            pending: Mapping[str, Sequence[Entry]] = ChainMap(own, others) if others else own  # type: ignore[arg-type]
            try:
                return self.deliverer.prepare(
                    raw, envelope.rcpt_tos, self.index, envelope.mail_from or "", pending, self.known, person
                )
            except IndexLagError as e:
                if attempt == LAG_ROUNDS - 1:
                    raise
                await self._indexed(e.message_ids)
        raise AssertionError("unreachable")

    async def _indexed(self, message_ids: Sequence[str]) -> None:
        self.committer.indexed()
        await self.others.settle(message_ids, self.index)

    def _stage(self, run: Path, plan: Plan, session: Session, envelope: Envelope, sender: str) -> str:
        """A run's agent sent it: checked, held in the run until the run succeeds."""
        what = describe(plan.parsed.event, plan.parsed.artifacts)
        try:
            RunBox(run).stage(plan.raw, envelope.mail_from or "", envelope.rcpt_tos, plan.message_id, what)
        except ToolError:
            reply = f"550 5.7.1 {SENDER_IDENTITY}: the run of {sender} has ended; its credential is no longer valid"
            return self._refuse(plan.message_id, plan.raw, session, envelope, reply, SENDER_IDENTITY)
        self.stats.delivered += 1
        log.info("%s from %s: staged in the run of %s", plan.message_id, sanitize(envelope.mail_from), sender)
        return xnotify.staged(plan.message_id, sender)

    def _refuse(self, mid: str, raw: bytes, session: Session, envelope: Envelope, reply: str, rule: str = "") -> str:
        """Count and log a refusal at DATA; the reason names the message: ``mid`` is "-" when
        the check failed before the plan was made, and the log then names the Message-ID the
        message itself carries, if any."""
        self.stats.refused += 1
        reply = reply[:990]
        if mid == "-":
            mid = parse(raw).message_id or "-"
        code, text = split(reply)
        refuse(
            "DATA", session, f"{code} {mid} from {envelope.mail_from} to {','.join(envelope.rcpt_tos)}: {text}", rule
        )
        return reply

    async def handle_exception(self, error: Exception) -> str:
        log.error("SMTP session error: %s", sanitize(repr(error)))
        return "451 4.3.0 temporary server error; try again later"


class Server:
    """The listening server: start, serve, stop cleanly.

    One process serves alone, or as worker ``worker`` of ``workflow smtpd --workers N``
    (``delivery.server.workers``): then it accepts on the parent's listening sockets beside the others, counts on the
    workers' shared ``tally``, tells its ``peers`` what it stores and hears from ``others`` what
    they store, and leaves the start's index refresh to whoever asks for it."""

    def __init__(
        self,
        config: Config,
        deliverer: Deliverer,
        *,
        host: str | None = None,
        port: int | None = None,
        tally: Tally | None = None,
        peers: Peers | None = None,
        others: Others | None = None,
        worker: int | None = None,
        refresh: bool = True,
        tcp: bool | socket.socket = True,
        sockets: Sequence[Path | socket.socket] = (),
    ) -> None:
        """``tcp``: listen on ``host:port`` (True), on a listening socket given (a worker's), or
        not at all (False: a run's server); ``sockets``: the Unix sockets where the owner and runs
        log in (``delivery.local``) — each a path to listen at, or a listening socket given."""
        self.config = config
        self.counted: Counted | None = None  # the refusal counter, while listening
        self.host = host or config.smtp.host
        self.port = config.smtp.port if port is None else port
        self.tcp = tcp
        self.sockets = tuple(sockets)
        self.unix_servers: list[asyncio.base_events.Server] = []
        self.made: list[tuple[str, tuple[int, int] | None]] = []  # the socket files this server made, to remove
        self.deliverer = Deliverer(config, deliverer.roster, Maildirs(config.mail_root), deliverer.history)
        self.stats = tally or Tally()
        self.worker = worker
        self.refresh = refresh
        self.index: Index | None = None
        self.committer = Committer(self.deliverer, peers, self._under_way)
        self.others = others
        self.server: asyncio.base_events.Server | None = None
        self.protocols: set[SMTP] = set()
        self.factory: Callable[[], SMTP] | None = None  # new connections' protocol, once started
        self.current: Current | None = None  # the config and roster, reloaded when their files change

    def _adopt(self, config: Config, roster: Roster) -> None:
        """Serve with a reloaded config and roster (``delivery.server.current``; [smtp] and the mail root are kept)."""
        self.config = self.deliverer.config = config
        self.deliverer.roster = roster

    def _under_way(self) -> int:
        """This process's mail transactions under way: MAIL given, DATA not yet answered."""
        return sum(1 for p in self.protocols if p.envelope is not None and p.envelope.mail_from is not None)

    def _protocol(self, handler: Handler, on_socket: bool = False) -> Callable[[], SMTP]:
        """Connections on TCP (people's logins, PLAIN and LOGIN) or on the local socket (the
        owner's and runs' ``X-WORKFLOW``, from processes of the owner's uid; its own cap)."""
        cfg = self.config.smtp
        users: Users = UsersFile(cfg.auth_users_file, self.deliverer.roster) if cfg.auth_users_file else {}
        auth: dict[str, Any] = {
            "logins": Logins(Authenticator(self.config.state.runs, users, mail_root=self.config.mail_root)),
            "require_auth": cfg.auth == "required",
            "login_timeout": cfg.login_timeout,
            "auth_require_tls": False,
            "auth_exclude_mechanism": ["PLAIN", "LOGIN"] if on_socket else [handshake.MECHANISM],
            "local": on_socket,
        }
        if not on_socket and not is_loopback(self.host):  # AUTH only after STARTTLS (check_bind made sure it is set up)
            auth.update(
                tls_context=tls_context(cfg.tls_cert, cfg.tls_key), require_starttls=True, auth_require_tls=True
            )
        return protocol_factory(
            handler,
            max_message_size=cfg.max_message_size,
            max_connections=cfg.max_connections,
            gate=Tally() if on_socket else self.stats,
            protocols=self.protocols,
            enable_SMTPUTF8=True,
            decode_data=False,
            hostname=self.config.domain,
            # the greeting names the mail root it serves (``credentials.root_id``): the owner's login
            # is bound to it, so a client can tell a server of another project before it logs in
            ident=f"workflow-mail smtpd, mail root {root_id(self.config.mail_root)}",
            timeout=cfg.timeout,
            loop=asyncio.get_running_loop(),
            **auth,
        )

    async def start(self) -> int:
        """Listen; returns the bound port."""
        quiet_aiosmtpd_log()
        if self.refresh:  # the one start of a server (of several workers, the supervisor's)
            secure_mail_root(self.config.mail_root)
        self.index = self.deliverer.open_index()  # reads, and the committer's index rows
        if self.refresh:
            self.index.refresh()  # copies stored before a crash but never indexed
        self.committer.known = self.index.message_ids()  # what a retry could be a retry of
        self.committer.start(self.index)
        self.current = Current(self.deliverer.config, self.deliverer.roster, self._adopt)
        handler = Handler(self.deliverer, self.index, self.committer, self.stats, self.others, self.current)
        self.counted = Counted(self.config.state.refusals)  # each refusal counted, for the cockpit's /metrics
        log.addHandler(self.counted)
        loop = asyncio.get_running_loop()
        self.factory = self._protocol(handler)
        try:
            if isinstance(self.tcp, socket.socket):
                self.server = await loop.create_server(self.factory, sock=self.tcp)
            elif self.tcp:
                self.server = await loop.create_server(self.factory, self.host, self.port)
            await self._listen_locally(handler)
        except (OSError, WorkflowError) as e:
            self._close_listeners()
            self.current.close()
            self.committer.stop()
            self.index.close()
            if isinstance(e, WorkflowError):
                raise
            if e.errno == errno.EADDRINUSE:
                raise address.in_use(self.host, self.port) from None
            raise ConfigError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from None
        if self.server is not None:
            self.port = int(self.server.sockets[0].getsockname()[1])
        if self.worker is None and self.tcp:
            log.info("listening on %s:%d (mail root %s)", self.host, self.port, self.config.mail_root)
        return self.port

    async def _listen_locally(self, handler: Handler) -> None:
        for where in self.sockets:
            sock = where
            if not isinstance(where, socket.socket):
                path = str(where)
                sock = local.claim(path)
                self.made.append((path, local.identity(path)))
            assert isinstance(sock, socket.socket)
            self.unix_servers.append(
                await asyncio.get_running_loop().create_unix_server(self._protocol(handler, on_socket=True), sock=sock)
            )

    def _close_listeners(self) -> None:
        for listener in (self.server, *self.unix_servers):
            if listener is not None:
                listener.close()
        for path, made in self.made:
            local.remove(path, made)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop listening, let transactions in DATA finish (each is stored, then acknowledged), close."""
        self._close_listeners()
        deadline = asyncio.get_running_loop().time() + grace
        while self.stats.in_flight and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        for p in list(self.protocols):
            if p.transport is not None:
                p.transport.close()
        await self.committer.drain()
        self.committer.stop()
        if self.counted is not None:
            log.removeHandler(self.counted)
            self.counted.close()
            self.counted = None
        if self.current is not None:
            self.current.close()
        if self.index is not None:
            self.index.close()


def secure_mail_root(mail_root: Path) -> None:
    """Take other users' access away from an older install's mail root (``core.modes``)."""
    tightened = modes.secure(mail_root)
    if tightened:
        log.warning(
            "made %d file(s) or folder(s) under %s the owner's only (other users could read them)", tightened, mail_root
        )


def stopped(delivered: int, refused: int, failed: int, also: str = "") -> None:
    """The server's last log line."""
    log.info("stopped: %d delivered, %d refused, %d failed%s", delivered, refused, failed, also)


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (a dependency on Linux): the SMTP protocol work
    is the server's largest CPU cost, and uvloop runs it in C; asyncio's own loop otherwise."""
    return LOOP_FACTORY()


class BackgroundServer:
    """A server on its own event loop thread (the demo, run-role and tests use it): ``with … as
    port:``. It listens on ``host:port`` unless ``tcp`` is False, and on the Unix ``sockets``
    (by default the mail root's two, where the owner's commands and runs find it)."""

    def __init__(
        self,
        config: Config,
        deliverer: Deliverer,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        tcp: bool = True,
        sockets: Sequence[Path] | None = None,
    ) -> None:
        self.config, self.deliverer, self.host, self.port = config, deliverer, host, port
        self.tcp = tcp
        self.sockets = config.state.server_sockets if sockets is None else tuple(sockets)
        self.loop = new_loop()
        self.server: Server | None = None
        self.thread = threading.Thread(target=self.loop.run_forever, name="smtpd", daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        self.server = Server(
            self.config, self.deliverer, host=self.host, port=self.port, tcp=self.tcp, sockets=self.sockets
        )
        try:
            self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)
        except BaseException:
            self._stop_loop()
            raise
        return self.port

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=60)
        self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def serve(
    config: Config, deliverer: Deliverer, host: str | None, port: int | None, ready: Callable[[int], None]
) -> Tally:
    """Run until SIGTERM or SIGINT, then stop cleanly."""

    async def main() -> Tally:
        server = Server(config, deliverer, host=host, port=port, sockets=config.state.server_sockets)
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        address.record(config, server.host, server.port)  # so the other commands find this port
        try:
            ready(server.port)
            await stop.wait()
            log.info("signal received: stopping")
            await server.stop()
            stopped(server.stats.delivered, server.stats.refused, server.stats.failed)
        finally:
            address.forget(config)
        return server.stats

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main())
