"""Fixtures of the bridge tests: the mail provider's SMTP submission server, at the wire."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from helpers.dovecot import PASSWORD, USER
from helpers.project import free_port


@pytest.fixture
def provider() -> Iterator[tuple[int, list[tuple[str, list[str], bytes]]]]:
    """An SMTP submission server standing in for smtp.gmail.com, at the wire: (port, what it got).
    Logging in is optional (the outbound tests without a password send without), but a login must be right."""
    from aiosmtpd.controller import Controller

    got: list[tuple[str, list[str], bytes]] = []

    class Provider:
        async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
            got.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))  # type: ignore[attr-defined]
            return "250 OK"

    def login(server: object, session: object, envelope: object, mechanism: str, data: object) -> AuthResult:
        """AUTH as a provider does it: only the mailbox's own login (helpers.dovecot's) gets in."""
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (USER.encode(), PASSWORD.encode())
        return AuthResult(success=ok, handled=False)

    port = free_port()
    controller = Controller(Provider(), hostname="127.0.0.1", port=port, authenticator=login, auth_require_tls=False)
    controller.start()
    try:
        yield port, got
    finally:
        controller.stop()
