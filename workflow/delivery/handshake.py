"""Handshake: the owner's and a run's login, which never sends its secret and makes the server
prove it holds it too.

Any local process can listen on the project's port while no server runs there (an agent shares
the network namespace), so a login that sends its secret (``AUTH PLAIN``) would hand the owner's
to whoever listens, and the mail after it. The owner's commands and a run's agent log in with
``AUTH X-WORKFLOW`` instead, a challenge-response in both directions::

    C: AUTH X-WORKFLOW base64("LOGIN CLIENT-NONCE")
    S: 334 base64("SERVER-NONCE")
    C: base64(hex HMAC-SHA256(key, "client" LOGIN CLIENT-NONCE SERVER-NONCE))
    S: 235 2.7.0 Authentication successful SERVER-PROOF   (HMAC(key, "server" …), in hex)

The key is the owner's secret, or for a run the SHA-256 of its token (what the server keeps).
The client checks the server's proof before it sends a message: a server that cannot prove it
(another program on the port, another project's server) gets nothing but a login name and an
HMAC of its own nonce, useless anywhere else. People's logins (``[smtp] auth_users_file``)
keep ``AUTH PLAIN``/``LOGIN``, behind STARTTLS off loopback.

Start-up time matters (``workflow-notify``'s fast path imports this): binascii and the builtin
SHA-256 only, HMAC written out (RFC 2104) — a test checks it against ``hmac``.
"""

from __future__ import annotations

import binascii
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MECHANISM = "X-WORKFLOW"
RUN_PREFIX = "~run/"
NONCE_HEX = 32  # characters of hex in each side's nonce


class LoginError(Exception):
    """The login did not happen; ``proven`` is False when the server could not prove itself
    (nothing must be sent to it)."""

    def __init__(self, message: str, code: int | None = None, proven: bool = True) -> None:
        super().__init__(message)
        self.code, self.proven = code, proven


def _sha256(data: bytes) -> bytes:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]  # lazy: a builtin, no OpenSSL start-up for a short command
    except ImportError:  # Python 3.12+: the builtin moved
        from hashlib import sha256  # lazy: the same function, where _sha256 is gone
    return bytes(sha256(data).digest())


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104)."""
    if len(key) > 64:
        key = _sha256(key)
    key = key.ljust(64, b"\0")
    inner = _sha256(bytes(k ^ 0x36 for k in key) + message)
    return _sha256(bytes(k ^ 0x5C for k in key) + inner)


def key_of(login: str, secret: str) -> bytes:
    """The HMAC key of a credential: the owner's secret; a run's token's SHA-256 (in hex), which
    is all the server keeps of it."""
    if login.startswith(RUN_PREFIX):
        return _sha256(secret.encode("utf-8", "replace")).hex().encode("ascii")
    return secret.encode("utf-8")


def proof(key: bytes, side: str, login: str, client_nonce: str, server_nonce: str) -> str:
    """What ``side`` ("client" or "server") answers to prove it holds ``key``."""
    text = "\0".join(("workflow-mail", side, login, client_nonce, server_nonce))
    return hmac_sha256(key, text.encode("utf-8")).hex()


def is_nonce(text: str) -> bool:
    return len(text) == NONCE_HEX and all(c in "0123456789abcdef" for c in text)


def _b64(text: str) -> str:
    return binascii.b2a_base64(text.encode("utf-8"), newline=False).decode("ascii")


def login(command: Callable[[str], tuple[int, str]], login: str, secret: str) -> None:
    """Log in as ``login`` over ``command`` (sends a line, returns the reply's code and text);
    LoginError when the server refuses, or cannot prove it holds the key (``proven`` False)."""
    key = key_of(login, secret)
    mine = os.urandom(NONCE_HEX // 2).hex()
    code, text = command(f"AUTH {MECHANISM} {_b64(f'{login} {mine}')}")
    if code != 334:
        raise LoginError(
            f"{code} {text}"
            + (
                " (the server does not offer workflow-mail's login: it is not a workflow-mail server)"
                if code == 504
                else ""
            ),
            code,
            proven=False,
        )
    try:
        theirs = binascii.a2b_base64(text.strip().encode("ascii"), strict_mode=True).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        theirs = ""
    if not is_nonce(theirs):
        command("*")
        raise LoginError(f"the server's challenge is not a workflow-mail nonce: {text[:60]!r}", proven=False)
    code, text = command(_b64(proof(key, "client", login, mine, theirs)))
    if code != 235:
        raise LoginError(f"{code} {text}", code)
    want = proof(key, "server", login, mine, theirs)
    said = text.split()[-1] if text.split() else ""
    if said != want:  # the server's proof is no secret: a plain comparison
        raise LoginError("the server accepted the login but could not prove it holds the key", code, proven=False)
