"""Logins: the server's side of AUTH — checked off the event loop, failures slowed per peer and
counted per connection, every refusal logged on one line.

A password check costs tens of milliseconds of PBKDF2 on purpose; run on the event loop, four
guessing connections would stall every other client, so checks run in a worker thread (hashlib
releases the GIL). An unknown login costs what a known one does (``Authenticator`` checks a
decoy). Each failure from a peer waits longer before it is answered (doubling, capped), and a
connection is dropped after ``MAX_FAILURES`` failed logins (``protocol``). ``workflow web``
waits before the check instead (``admit``), so its right password is never answered sooner.

The owner's and a run's ``X-WORKFLOW`` login (``handshake``) is checked here too: the client's
proof against the key, and the server's proof made for the answer. A command refused with ``530``
(not logged in) counts as a failure too: a client without a login that retries in a loop is
slowed like one guessing. Each failure is logged (``refusals``) before its delay, so a client
that hangs up at once is logged all the same.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from typing import NamedTuple

from workflow.delivery import handshake
from workflow.delivery.credentials import Authenticator, Identity
from workflow.delivery.server.refusals import refused

MAX_FAILURES = 3  # failed logins a connection may make before it is dropped
FIRST_DELAY = 0.25  # seconds the first failure from a peer waits before its answer; doubles after
MAX_DELAY = 4.0
FORGET_AFTER = 300.0  # a peer's failures are forgotten after this many seconds without one
MAX_PEERS = 4096  # peers remembered at most (the oldest are forgotten first)


class Proven(NamedTuple):
    identity: Identity
    answer: str  # the server's proof, sent with the 235


class Logins:
    """Checks logins for one server process."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth
        self.failures: dict[str, tuple[int, float, float]] = {}  # peer → (failures, the last's time, its answer's)

    async def check(self, peer: str, mechanism: str, login: str, secret: str, code: int = 535) -> Identity | None:
        """A PLAIN or LOGIN login: the identity, or None after the peer's delay (``code``: the
        reply a failure gets, for the log)."""
        identity = await asyncio.get_running_loop().run_in_executor(None, self.auth.check, login, secret)
        if identity is None:
            await self.failed(peer, mechanism, login, code)
        return identity

    def current(self, identity: Identity) -> bool:
        """Whether a connection's login still stands (the users file may have changed since)."""
        return self.auth.still(identity)

    def challenge(self) -> str:
        """A fresh server nonce for an ``X-WORKFLOW`` login."""
        return secrets.token_hex(handshake.NONCE_HEX // 2)

    async def prove(
        self, peer: str, login: str, client_nonce: str, server_nonce: str, answer: str, code: int = 535
    ) -> Proven | None:
        """An ``X-WORKFLOW`` login: the identity and the server's proof, or None after the delay."""
        found = self.auth.key(login)
        if found is not None and handshake.is_nonce(client_nonce):
            identity, key = found
            want = handshake.proof(key, "client", login, client_nonce, server_nonce)
            if hmac.compare_digest(answer.encode(), want.encode()):
                return Proven(identity, handshake.proof(key, "server", login, client_nonce, server_nonce))
        await self.failed(peer, handshake.MECHANISM, login, code)
        return None

    async def failed(self, peer: str, mechanism: str, login: str, code: int = 535) -> None:
        """Count a failed login from ``peer``, log it (answered ``code``), and wait its delay."""
        count, wait = self._count(peer)
        refused("AUTH", peer, login, f"{code} {mechanism} login failed; {count} failure(s) from this peer lately")
        await asyncio.sleep(wait)

    async def unauthenticated(self, peer: str, command: str, reply: str) -> None:
        """A command refused because the connection has not logged in (``530``): count it as a
        failure from ``peer``, log it, and wait its delay."""
        count, wait = self._count(peer)
        refused(command, peer, None, f"{reply}; {count} failure(s) from this peer lately")
        await asyncio.sleep(wait)

    async def admit(self, peer: str) -> bool:
        """Before a login from ``peer`` is checked (``workflow web``): when it failed lately, count
        the attempt as a failure now and wait the delay that gives it — so a right password is
        answered no sooner than a wrong one, and a guesser that gives up on slow answers gains
        nothing (its attempts in flight count already). True when it was counted. Not in turn
        behind the peer's queued refusals: a login never waits more than ``MAX_DELAY``."""
        now = time.monotonic()
        count, last, free = self.failures.get(peer, (0, 0.0, 0.0))
        if not count or now - last > FORGET_AFTER:
            return False
        self.failures[peer] = (count + 1, now, free)
        await asyncio.sleep(min(FIRST_DELAY * 2**count, MAX_DELAY))
        return True

    def note(self, peer: str, mechanism: str, login: str, code: int, counted: bool) -> None:
        """Log a failed login from ``peer`` without waiting (its wait came first: ``admit``), and
        count it unless ``admit`` did."""
        count = self.failures.get(peer, (0, 0.0, 0.0))[0] if counted else self._count(peer)[0]
        refused("AUTH", peer, login, f"{code} {mechanism} login failed; {count} failure(s) from this peer lately")

    def _count(self, peer: str) -> tuple[int, float]:
        """Count one more failure from ``peer``: (its failures lately, seconds to wait before the
        answer). A peer's failures are answered one after another, each its delay after the one
        before: many connections guessing at once get no more answers than one would."""
        now = time.monotonic()
        count, last, free = self.failures.pop(peer, (0, now, now))
        count = 1 if now - last > FORGET_AFTER else count + 1
        answer = max(now, free) + min(FIRST_DELAY * 2 ** (count - 1), MAX_DELAY)
        self.failures[peer] = (count, now, answer)  # re-inserted: the dict keeps peers in order of their last failure
        while len(self.failures) > MAX_PEERS:
            del self.failures[next(iter(self.failures))]
        return count, answer - now
