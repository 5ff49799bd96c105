"""Credentials: who is sending — the owner of the mail root, one run of one role, or an AUTH login.

Every submission is authenticated (``[smtp] auth = "required"``, the default), and the login
decides which roles the message may come from. The owner and runs prove their key with
``X-WORKFLOW`` (``handshake``) on the server's Unix socket only (``delivery.local``); people log in
with PLAIN or LOGIN on TCP:

* ``~owner`` — whoever owns the mail root: their shell, agentd, run-role's commit, the bridges.
  Its secret is in a per-user file outside every project and mail root
  (``$WORKFLOW_CREDENTIALS``, else ``$XDG_CONFIG_HOME/workflow/credentials``, else
  ``~/.config/workflow/credentials``), mode 0600, made on first use. It may send as any role,
  as the owner may also write the Maildirs directly.
* ``~run/ROLE`` — one run of ROLE. run-role mints a token when the run begins, keeps only its
  SHA-256 in the run's directory (``delivery.staging``; the sandbox hides it from every agent)
  and hands the token to its agent in ``$WORKFLOW_TOKEN``. It may send as ROLE only; what it sends
  is checked and staged in the run, delivered only if the run succeeds. It dies with the run.
* a login of ``[smtp] auth_users_file``: ``login:SECRET[:role,role…]`` (the roles it may send as;
  default the role named like the login), or ``login:SECRET:@HOST``: another host's Postfix (a
  peer), which relays the mail of the roles that live on HOST only, to this host's roles only. ``workflow smtpd --hash-password`` makes the SECRET, in
  Dovecot's ``{PBKDF2}`` scheme, so ``workflow imap`` serves the same logins over IMAP. The
  server reads the file again whenever it changes (``UsersFile``): a new login or password needs
  no restart, a removed login is refused at once.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple, Protocol

from workflow.core.errors import RosterError, WorkflowError
from workflow.core.files import create_atomic
from workflow.delivery import owner
from workflow.delivery.handshake import RUN_PREFIX
from workflow.delivery.staging import RunBox, token_digest
from workflow.policy.roster import Roster

log = logging.getLogger("workflow.delivery.server.smtpd")  # the server's log

OWNER = "~owner"
LOGIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
ROLE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
PEER = "@"  # a users-file line whose roles are ``@HOST``: that host's Postfix, a peer (``Identity.peer``)
PEER_RE = re.compile(r"^@[a-z0-9][a-z0-9_-]*$")


def root_id(mail_root: Path) -> str:
    """A short, stable name of a mail root (its resolved path, hashed): what the owner's login
    is bound to, so a server never takes the owner's mail meant for another project's root."""
    return hashlib.sha256(os.fsencode(Path(mail_root).resolve())).hexdigest()[:16]


def owner_login(mail_root: Path) -> str:
    """The owner's login to the server of this mail root: ``~owner/<root id>``."""
    return f"{OWNER}/{root_id(mail_root)}"


class Identity(NamedTuple):
    """Who a connection authenticated as."""

    login: str
    roles: frozenset[str] | None  # the roles it may send as; None: any (the owner)
    run: Path | None = None  # the run directory of a run credential
    secret: str = ""  # a person's secret as the users file had it at login (an edit ends the login)

    def may_send_as(self, role: str) -> bool:
        return self.roles is None or role in self.roles

    @property
    def peer(self) -> str:
        """The host whose Postfix this login is (``login:SECRET:@HOST`` in the users file): it
        relays mail of the roles that live on that host only ("" for any other login)."""
        if self.roles is not None and len(self.roles) == 1:
            (only,) = self.roles
            if only.startswith(PEER):
                return only[len(PEER) :]
        return ""

    @property
    def person(self) -> bool:
        """A person's users-file login (not the owner's, a run's or a peer's)."""
        return self.run is None and bool(self.secret) and not self.peer

    def describe(self) -> str:
        if self.roles is None:
            return f"login {self.login}"
        if self.peer:
            return f"login {self.login} is host {self.peer}'s: it relays the mail of {self.peer}'s roles only"
        return f"login {self.login} may send as {', '.join(sorted(self.roles))} only"


class Credential(NamedTuple):
    """What a client logs in with."""

    login: str
    secret: str

    @property
    def run_role(self) -> str | None:
        return self.login[len(RUN_PREFIX) :] if self.login.startswith(RUN_PREFIX) else None


# -- the owner's secret


def owner_file(env: Mapping[str, str] | None = None) -> Path:
    """Where the owner's secret lives (outside every project and mail root; ``delivery.owner``)."""
    return Path(owner.path(os.environ if env is None else env))


def owner_secret(env: Mapping[str, str] | None = None, create: bool = True) -> str:
    """The owner's secret (checked as ``delivery.owner.read`` checks it), made (0600, in a 0700
    directory) on first use.

    Made whole, then linked into place: written and synced under a temporary name beside it, then
    ``link(2)``ed to its name, which fails if the name exists. Processes that start at the same
    moment on a fresh host (``workflow smtpd`` and ``agentd run``) never see the file empty or half
    written, and the first link wins: every one of them reads the same secret."""
    path = owner_file(env)
    try:
        return owner.read(str(path))
    except owner.MissingError:
        if not create:
            raise
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        create_atomic(path, secrets.token_hex(32) + "\n", mode=0o600)
    except FileExistsError:
        pass  # another process made it first: its secret is the one
    except OSError as e:
        raise WorkflowError(f"{path}: cannot make the owner credential: {e.strerror}") from None
    return owner.read(str(path))


def client_credential(env: Mapping[str, str] | None = None, mail_root: Path | None = None) -> Credential:
    """What this process logs in with: its run's token inside a run, else the owner's secret —
    under the login bound to ``mail_root`` (a server of another root refuses it)."""
    env = os.environ if env is None else env
    token, role = env.get("WORKFLOW_TOKEN", ""), env.get("WORKFLOW_ROLE", "")
    if env.get("WORKFLOW_NO_CREDENTIAL"):
        raise WorkflowError(f"cannot send: {env['WORKFLOW_NO_CREDENTIAL']}")
    if token:
        if not ROLE_RE.match(role):
            raise WorkflowError("$WORKFLOW_TOKEN is set but $WORKFLOW_ROLE does not name a role")
        return Credential(RUN_PREFIX + role, token)
    return Credential(owner_login(mail_root) if mail_root is not None else OWNER, owner_secret(env))


def mint() -> tuple[str, str]:
    """A new run token and the digest the run's directory keeps."""
    token = secrets.token_hex(32)
    return token, token_digest(token)


# -- the AUTH users file


class User(NamedTuple):
    secret: str
    roles: tuple[str, ...]


PBKDF2 = "{PBKDF2}"
PBKDF2_ROUNDS = 100_000
SALT_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./"


def hash_password(password: str, salt: str | None = None, rounds: int = PBKDF2_ROUNDS) -> str:
    """A users-file entry's secret in Dovecot's ``{PBKDF2}`` scheme (PBKDF2-HMAC-SHA1), so the
    same file serves SMTP AUTH here and IMAP logins in Dovecot (``workflow imap``)."""
    salt = salt or "".join(secrets.choice(SALT_CHARS) for _ in range(16))
    digest = hashlib.pbkdf2_hmac("sha1", password.encode("utf-8"), salt.encode("ascii"), rounds)
    return f"{PBKDF2}$1${salt}${rounds}${digest.hex()}"


def check_password(password: str, secret: str) -> bool:
    if secret.startswith(PBKDF2):
        _, _, salt, rounds, _ = secret[len(PBKDF2) :].split("$")
        return hmac.compare_digest(hash_password(password, salt, int(rounds)), secret)
    salt_hex = secret.split("$")[1]  # scrypt$salt$hash, the format before Dovecot shared the file
    digest = hashlib.scrypt(password.encode("utf-8"), salt=bytes.fromhex(salt_hex), n=2**14, r=8, p=1)
    return hmac.compare_digest(f"scrypt${salt_hex}${digest.hex()}", secret)


SECRET_RE = re.compile(
    r"^(\{PBKDF2\}\$1\$[A-Za-z0-9./]{1,64}\$[1-9][0-9]{0,8}\$[0-9a-f]{40}|scrypt\$[0-9a-f]+\$[0-9a-f]+)$"
)


def load_users(path: str) -> dict[str, User]:
    """``login:SECRET[:role,role…]`` lines (``workflow smtpd --hash-password`` makes the secret)."""
    users: dict[str, User] = {}
    where: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise WorkflowError(f"{path}: cannot read the AUTH users file: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(":")
        if len(parts) not in (2, 3) or not SECRET_RE.match(parts[1]):
            raise WorkflowError(
                f"{path}:{n}: expected login:SECRET[:role,role…] (SECRET from `workflow smtpd --hash-password`)"
            )
        login = parts[0]
        if not LOGIN_RE.match(login):
            raise WorkflowError(f"{path}:{n}: {login!r} is not a login (letters, digits, . _ @ + -)")
        roles = tuple(r.strip() for r in parts[2].split(",") if r.strip()) if len(parts) == 3 else (login,)
        bad = [r for r in roles if not ROLE_RE.match(r)]
        if len(roles) == 1 and PEER_RE.match(roles[0]):
            bad = []  # a peer host's login
        if not roles or bad:
            raise WorkflowError(f"{path}:{n}: {login}: expected the roles it may send as, got {parts[2]!r}")
        if login in where:  # Dovecot would take the first line and this server the last: neither may guess
            raise WorkflowError(
                f"{path}:{n}: login {login} is on line {where[login]} already; one line per login "
                "(to change a password, replace its line)"
            )
        where[login] = n
        users[login] = User(parts[1], roles)
    if not users:
        raise WorkflowError(f"{path}: no users")
    return users


def load_people(path: str, roster: Roster) -> dict[str, User]:
    """The users file, each login's roles checked against the roster: what ``workflow smtpd``
    serves and ``workflow doctor`` checks (one message for one problem)."""
    users = load_users(path)
    for login, user in users.items():
        if user.roles[0].startswith(PEER):
            host = user.roles[0][len(PEER) :]
            if host not in roster.hosts:
                hosts = ", ".join(roster.hosts) or "none: the project lists no [hosts.NAME]"
                raise WorkflowError(f"{path}: login {login}: @{host} names no host; expected one of {hosts}")
            continue
        for role in user.roles:
            try:
                roster.sender(f"{role}@{roster.domain}")
            except RosterError as e:
                raise WorkflowError(f"{path}: login {login}: {e}") from None
    return users


class Users(Protocol):
    def get(self, login: str, /) -> User | None: ...


class UsersFile:
    """The users file as the server sees it now: read again when its inode, size or time
    changes (a stat per login, cheap beside the password check). A file that turns bad refuses
    every login until it is mended — a login removed by the same edit must not live on."""

    def __init__(self, path: str, roster: Roster) -> None:
        self.path = path
        self.roster = roster
        self.stamp = self._stamp()
        self.users: dict[str, User] | None = load_people(path, roster)  # a bad file at start stops the server

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def get(self, login: str) -> User | None:
        stamp = self._stamp()
        if stamp != self.stamp:
            self.stamp = stamp
            try:
                self.users = load_people(self.path, self.roster)
                log.info("%s: read again, %d login(s)", self.path, len(self.users))
            except WorkflowError as e:
                self.users = None
                log.error("%s; every login is refused until it is mended", e)
        return None if self.users is None else self.users.get(login)


# -- the server's side


class Authenticator:
    """Checks a login and its secret; returns the Identity, or None."""

    def __init__(
        self,
        runs_dir: Path,
        users: Users,
        env: Mapping[str, str] | None = None,
        mail_root: Path | None = None,
    ) -> None:
        """With ``mail_root``, the owner's login must be the one bound to it (``owner_login``):
        the owner's mail meant for another project's root is refused, never stored here."""
        self.runs_dir = runs_dir
        self.owner = owner_login(mail_root) if mail_root is not None else None
        self.users = users
        self.env = dict(os.environ if env is None else env)
        owner_secret(self.env)  # made now, so the first client finds it
        # an unknown login is checked against this, so it costs what a known one does (no enumeration)
        self.decoy = hash_password(secrets.token_hex(16))

    def key(self, login: str) -> tuple[Identity, bytes] | None:
        """The identity of an owner's or a run's login and the key its ``X-WORKFLOW`` proof is
        made with (``handshake``); None for any other login (people's logins prove nothing
        that way: their secrets are stored hashed)."""
        if login == OWNER or login.startswith(OWNER + "/"):
            if self.owner is not None and login != self.owner:
                return None
            try:
                return Identity(login, None), owner_secret(self.env, create=False).encode()
            except WorkflowError:
                return None
        if login.startswith(RUN_PREFIX):
            role = login[len(RUN_PREFIX) :]
            if not ROLE_RE.match(role) or ".." in role:
                return None
            box = RunBox(self.runs_dir / f"{role}.run")
            digest = box.key()
            return (Identity(login, frozenset({role}), box.dir), digest.encode()) if digest else None
        return None

    def check(self, login: str, secret: str) -> Identity | None:
        """A person's PLAIN or LOGIN login. The owner's and runs' logins are never taken this way:
        they prove their key over the local socket (``key``, ``delivery.local``)."""
        if login.startswith("~"):
            check_password(secret, self.decoy)  # as long as any other refusal
            return None
        user = self.users.get(login)
        if user is None:
            check_password(secret, self.decoy)
            return None
        if not check_password(secret, user.secret):
            return None
        return Identity(login, frozenset(user.roles), secret=user.secret)

    def still(self, identity: Identity) -> bool:
        """Whether a person's login still stands as it was made: its line of the users file is
        there, with the same secret and roles (the owner's and runs' logins are not in that file)."""
        if identity.roles is None or identity.run is not None or not identity.secret:
            return True
        user = self.users.get(identity.login)
        return user is not None and user.secret == identity.secret and frozenset(user.roles) == identity.roles
