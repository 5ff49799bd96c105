"""Auth: who is at the browser — logins checked as SMTP AUTH checks them, the owner's one-time
links, sessions in signed cookies, and the CSRF token of each session.

A person's login is one of the ``[smtp] auth_users_file`` logins (the same secrets:
``credentials.UsersFile`` reads the file again when it changes). Checks go through
``delivery.server.logins.Logins``, as the SMTP server's do: off the event loop; a peer that failed
lately waits before its next attempt is checked (doubling, ``Logins.admit``: a right password is
answered no sooner than a wrong one), and each failure is logged on the server log's
``refused AUTH …`` line that contrib/fail2ban matches.

The owner never logs in with a secret here: a login beginning with ``~`` is refused before any
check. The owner opens a one-time link (``once.Links``: printed when the server starts, and by
``workflow web login`` over the server's Unix socket); a link used already, expired or of a
server since restarted is a failure like a wrong password.

A session is a cookie (HttpOnly, SameSite=Strict, Secure under TLS) holding the login, the role
it views as, its expiry, a nonce, and a fingerprint of the login's secret — signed (HMAC-SHA256)
with a key kept in the state directory (``web.key``, 0600), so a restart of the server keeps
people logged in, and a changed password or a removed login (or a changed owner's secret) ends
the session at its next request.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.delivery import credentials
from workflow.delivery.credentials import Authenticator, UsersFile
from workflow.delivery.server.logins import Logins
from workflow.policy.roster import Roster
from workflow.web.once import Links

log = logging.getLogger(__name__)

OWNER = "~owner"  # the owner's login here (no users-file login may begin with "~")
COOKIE = "workflow_session"


class Viewer(NamedTuple):
    """A logged-in person: who, which roles they may act as (None: the owner, any), and the role
    whose mail and board they are looking at now."""

    login: str
    roles: tuple[str, ...] | None
    role: str
    nonce: str
    expires: float

    @property
    def owner(self) -> bool:
        return self.roles is None

    def may_be(self, name: str) -> bool:
        """Whether this person may view as, and send as, ``name``."""
        return self.roles is None or name in self.roles


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_key(path: Path) -> bytes:
    """The signing key (made on first use, 0600): sessions outlive a restart of the server."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        data = path.read_text().strip()
        if len(data) != 64 or path.stat().st_mode & 0o077:
            raise WorkflowError(
                f"{path}: not a session key of this server (64 hex digits, mode 0600); remove it"
            ) from None
        return bytes.fromhex(data)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return load_key(path)


class Sessions:
    """Logins, sessions and CSRF tokens for one server."""

    def __init__(self, app: App, env: dict[str, str] | None = None) -> None:
        self.app = app
        self.env = dict(os.environ if env is None else env)
        cfg = app.config
        self.hours = cfg.web.session_hours
        self.key = load_key(cfg.state.root / "web.key")
        users: credentials.Users = (
            UsersFile(cfg.smtp.auth_users_file, app.roster) if cfg.smtp.auth_users_file else _NoUsers()
        )
        self.users = users
        self.users_file = users if isinstance(users, UsersFile) else None
        self.logins = Logins(Authenticator(cfg.state.runs, users, self.env, cfg.mail_root))
        self.revoked = Revoked(cfg.state.root / "web.revoked")
        self.links = Links()

    def users_roster(self, roster: Roster) -> None:
        """The roster a login's roles are checked against, after a reload."""
        if self.users_file is not None:
            self.users_file.roster = roster
            self.users_file.stamp = None  # read again against it

    # -- logging in

    async def login(self, peer: str, login: str, password: str) -> Viewer | None:
        """The viewer for a person's login and password, or None (logged). A peer that failed
        lately waits its next failure's delay first (``Logins.admit``), whatever it sends. The
        owner's and runs' logins (``~…``) are never taken here (``Authenticator.check``)."""
        counted = await self.logins.admit(peer)
        identity = await asyncio.to_thread(self.logins.auth.check, login, password)  # PBKDF2: off the loop
        if identity is None or identity.roles is None:
            self.logins.note(peer, "WEB", login, 401, counted)
            return None
        roles = tuple(sorted(identity.roles))
        return self._viewer(login, roles, roles[0])

    async def redeem(self, peer: str, token: str) -> Viewer | None:
        """The owner's session for an open one-time link (it is closed now), or None (logged as a
        failed login of the owner's, slowed like one)."""
        counted = await self.logins.admit(peer)
        if not self.links.redeem(token):
            self.logins.note(peer, "WEB", OWNER, 401, counted)
            return None
        log.info("the owner logged in from %s with a one-time link", peer)
        return self._viewer(OWNER, None, self.app.config.default_sender)

    def _owner_secret(self) -> str:
        """The owner's secret as it is now ("" while there is none): a session of the owner's
        ends when it changes."""
        try:
            return credentials.owner_secret(self.env, create=False)
        except WorkflowError:
            return ""

    def _viewer(self, login: str, roles: tuple[str, ...] | None, role: str) -> Viewer:
        return Viewer(login, roles, role, secrets.token_hex(16), time.time() + self.hours * 3600)

    # -- the cookie

    def _fingerprint(self, login: str) -> str:
        """What ends a session when it changes: the login's secret (and its roles) as stored now."""
        if login == OWNER:
            secret = self._owner_secret()
        else:
            user = self.users.get(login)
            if user is None:
                return ""
            secret = user.secret + ":" + ",".join(user.roles)
        return hashlib.sha256(self.key + secret.encode()).hexdigest()[:32]

    def _sign(self, payload: str) -> str:
        return hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()

    def cookie(self, v: Viewer) -> str:
        body = {"l": v.login, "r": v.role, "n": v.nonce, "e": v.expires, "f": self._fingerprint(v.login)}
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}"

    def viewer(self, cookie: str | None) -> Viewer | None:
        """The session a cookie holds, if it is ours, unexpired, and its login still stands as it was."""
        if not cookie or "." not in cookie or len(cookie) > 4096:
            return None
        payload, sig = cookie.rsplit(".", 1)
        if not hmac.compare_digest(sig, self._sign(payload)):
            return None
        try:
            body = json.loads(_unb64(payload))
            login, role, nonce, expires, fp = (
                str(body["l"]),
                str(body["r"]),
                str(body["n"]),
                float(body["e"]),
                str(body["f"]),
            )
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if expires < time.time() or not fp or not hmac.compare_digest(fp, self._fingerprint(login)):
            return None
        if nonce in self.revoked:
            return None
        if login == OWNER:
            return Viewer(login, None, role, nonce, expires)
        user = self.users.get(login)
        if user is None:
            return None
        roles = tuple(sorted(user.roles))
        return Viewer(login, roles, role if role in roles else roles[0], nonce, expires)

    def end(self, v: Viewer) -> None:
        """Log out: the session's cookie is refused from now on, wherever a copy of it is."""
        self.revoked.add(v.nonce, v.expires)

    def seal(self, v: Viewer, text: str) -> str:
        """``text`` as a cookie value only this server makes, for this session."""
        payload = _b64(text.encode())
        return f"{payload}.{self._sign('flash:' + v.nonce + ':' + payload)}"

    def unseal(self, v: Viewer, value: str) -> str:
        """What ``seal`` sealed for this session; "" for anything else (another session's, a forgery)."""
        payload, _, sig = value.partition(".")
        if not payload or not hmac.compare_digest(sig, self._sign("flash:" + v.nonce + ":" + payload)):
            return ""
        try:
            return _unb64(payload).decode()
        except (ValueError, binascii.Error):
            return ""

    def csrf(self, v: Viewer) -> str:
        """The session's CSRF token: every form carries it, every POST must."""
        return hmac.new(self.key, b"csrf:" + v.nonce.encode(), hashlib.sha256).hexdigest()[:40]

    def csrf_ok(self, v: Viewer, token: str) -> bool:
        return bool(token) and hmac.compare_digest(token, self.csrf(v))


class Revoked:
    """Sessions logged out before they expired (``web.revoked``: one ``NONCE EXPIRES`` a line,
    kept until they would have expired anyway), read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int] | None = None
        self.nonces: dict[str, float] = {}
        self.lock = threading.Lock()

    def _load(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self.stamp, self.nonces = None, {}
            return
        if (st.st_mtime_ns, st.st_size) == self.stamp:
            return
        self.stamp = (st.st_mtime_ns, st.st_size)
        out: dict[str, float] = {}
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            nonce, _, expires = line.partition(" ")
            try:
                out[nonce] = float(expires)
            except ValueError:
                continue
        self.nonces = out

    def __contains__(self, nonce: str) -> bool:
        self._load()
        return nonce in self.nonces

    def add(self, nonce: str, expires: float) -> None:
        with self.lock:
            self._add(nonce, expires)

    def _add(self, nonce: str, expires: float) -> None:
        self._load()
        now = time.time()
        keep = {n: e for n, e in self.nonces.items() if e > now}
        keep[nonce] = expires
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{n} {e}\n" for n, e in keep.items()))
        os.replace(tmp, self.path)


class _NoUsers:
    """No ``[smtp] auth_users_file``: only the owner logs in."""

    def get(self, login: str, /) -> credentials.User | None:
        return None
