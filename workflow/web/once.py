"""Once: the owner's one-time login links — minted when the server starts and whenever the owner
asks over the server's Unix socket (``workflow web login``), each good once and for a few minutes,
none after a restart. The owner never types a secret into a page.

A TCP port on loopback is anyone's to listen on while the cockpit is down, so the owner's login
never crosses one as a secret: what a squatter could be handed is a link of a server that does
not run (worthless), and the link comes from ``<state>/sock/web`` — the state directory is the
owner's (0700, hidden from every sandbox) and the server refuses a peer of another uid
(``SO_PEERCRED``), as ``workflow smtpd``'s socket does (``delivery.local``).

* ``Links`` — the server's open links: ``mint``, ``redeem`` (kept in memory only, hashed);
* ``answer`` — the server's side of the socket: ``LINK`` → ``OK <url>``;
* ``ask`` — the owner's side: a fresh link from the running server, or an error saying why not.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from workflow.core.errors import WorkflowError
from workflow.delivery import local

log = logging.getLogger(__name__)

LINK_SECONDS = 300.0  # how long a link stays good (the owner opens it at once)
MAX_OPEN = 64  # links open at most; minting another forgets the oldest
REQUEST = b"LINK\n"


class Links:
    """The one-time login links of one server process: none survives it."""

    def __init__(self, seconds: float = LINK_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.open: dict[str, float] = {}  # sha256 of a token → when it stops being good
        self.lock = threading.Lock()

    def mint(self) -> str:
        """A new token, good once, for ``seconds``."""
        token = secrets.token_urlsafe(32)
        now = self.clock()
        with self.lock:
            self.open = {h: until for h, until in self.open.items() if until > now}
            while len(self.open) >= MAX_OPEN:
                del self.open[next(iter(self.open))]
            self.open[_digest(token)] = now + self.seconds
        return token

    def redeem(self, token: str) -> bool:
        """Whether ``token`` is an open link of this server; it is not any more, either way."""
        if not token or len(token) > 200:
            return False
        with self.lock:
            until = self.open.pop(_digest(token), None)
        return until is not None and self.clock() <= until


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Callable[[], str]) -> None:
    """One connection to the server's socket: a link for the owner's processes, a refusal for any
    other uid (the socket's directory keeps them out already)."""
    try:
        uid = local.peer_uid(writer.get_extra_info("socket"))
        if uid != os.getuid():
            log.warning("refused a login link to uid %s: not the owner's", uid)
            writer.write(b"NO only the owner's processes get a login link\n")
            return
        request = await asyncio.wait_for(reader.readline(), 10)
        if request != REQUEST:
            writer.write(b"NO expected LINK\n")
            return
        writer.write(b"OK " + link().encode() + b"\n")
        log.info("gave the owner a one-time login link")
    except (OSError, TimeoutError, ValueError):
        pass
    finally:
        try:
            await writer.drain()
        except OSError:
            pass
        writer.close()


def ask(path: Path, timeout: float = 10.0) -> str:
    """A fresh one-time login link from the ``workflow web`` listening at ``path``."""
    try:
        sock = local.connect(str(path), timeout)
    except OSError:
        raise WorkflowError(f"no workflow web runs for this mail root (nothing answers {path}): start it") from None
    with sock:
        try:
            sock.sendall(REQUEST)
            data = b""
            while not data.endswith(b"\n") and len(data) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as e:
            raise WorkflowError(f"workflow web at {path} did not answer: {e.strerror or e}") from None
    said = data.decode(errors="replace").strip()
    if not said.startswith("OK "):
        raise WorkflowError(f"workflow web at {path} refused a login link: {said.removeprefix('NO ') or 'no answer'}")
    return said[3:]
