"""SMTP AUTH: the users file (``login:scrypt$salt$hash``), password hashing, and the check aiosmtpd calls.

``workflow smtpd --hash-password`` reads a password on stdin and prints the secret to put after
``login:``; ``[smtp] auth_users_file`` names the file. Secrets are scrypt hashes compared in
constant time; a login not in the file fails the same way as a wrong password.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from typing import Any

from workflow.core.errors import WorkflowError


def hash_password(password: str, salt: bytes | None = None) -> str:
    """A users-file entry's secret: ``scrypt$<salt hex>$<hash hex>``."""
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=2**14, r=8, p=1)
    return f"scrypt${salt.hex()}${digest.hex()}"


def load_users(path: str) -> dict[str, str]:
    """``login:scrypt$salt$hash`` lines (``workflow smtpd --hash-password`` makes them)."""
    users: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise WorkflowError(f"{path}: cannot read the AUTH users file: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        login, sep, secret = line.partition(":")
        if not sep or not secret.startswith("scrypt$") or secret.count("$") != 2:
            raise WorkflowError(f"{path}:{n}: expected login:scrypt$salt$hash")
        users[login] = secret
    if not users:
        raise WorkflowError(f"{path}: no users")
    return users


def make_authenticator(users: dict[str, str]) -> Callable[..., Any]:
    """The ``authenticator`` aiosmtpd calls for AUTH PLAIN and LOGIN."""
    from aiosmtpd.smtp import AuthResult, LoginPassword  # lazy: only a remote listener authenticates

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login = data.login.decode("utf-8", "replace")
        secret = users.get(login)
        if secret is None:
            return AuthResult(success=False, handled=False)
        salt = bytes.fromhex(secret.split("$")[1])
        ok = hmac.compare_digest(hash_password(data.password.decode("utf-8", "replace"), salt), secret)
        return AuthResult(success=ok, handled=False)

    return authenticate
