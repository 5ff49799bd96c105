"""Listeners: where a server may listen — loopback by default; any other address only with AUTH
required and STARTTLS set up, and AUTH offered only after STARTTLS there (``tls_context``); and
the port the workers share (``reserve``)."""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl

from workflow.core.config import Config
from workflow.core.errors import ConfigError, WorkflowError
from workflow.delivery import address
from workflow.delivery.credentials import load_users


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names (or resolves to) is a loopback address — judged by
    ``ipaddress``, never by how the name is spelled (``::1234`` and ``localhost.example`` are not)."""
    name = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


def check_bind(host: str, allow_remote: bool, config: Config) -> None:
    """Loopback only, unless --allow-remote with AUTH required and STARTTLS set up."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise WorkflowError(
            f"refusing to listen on {host}: not a loopback address (use --allow-remote, with AUTH and TLS configured)"
        )
    where = config.path or "workflow.toml"
    if config.smtp.auth != "required":
        raise WorkflowError(f'refusing to listen on {host}: --allow-remote needs [smtp] auth = "required" in {where}')
    if not (config.smtp.tls_cert and config.smtp.tls_key):
        raise WorkflowError(
            f"refusing to listen on {host}: --allow-remote needs STARTTLS; set [smtp] tls_cert and tls_key in {where}"
        )
    tls_context(config.smtp.tls_cert, config.smtp.tls_key)
    if config.smtp.auth_users_file:
        load_users(config.smtp.auth_users_file)


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """The server's STARTTLS context (TLS 1.2 or later)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise WorkflowError(f"[smtp] tls_cert/tls_key: cannot load {cert} and {key}: {e}") from None
    return ctx


def reserve(host: str, port: int) -> socket.socket:
    """Listen on ``host:port`` for the workers (port 0: a free one), refusing a port anything
    holds. No SO_REUSEPORT: no other process — an agent of the owner's uid included — can join
    the port and take a share of its connections."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e}") from None
    held = socket.socket(family, kind, proto)
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does: TIME_WAIT is no holder
        held.bind(where)
        held.listen(1024)
    except OSError as e:
        held.close()
        if e.errno == errno.EADDRINUSE:
            raise address.in_use(host, port) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    held.setblocking(False)
    held.set_inheritable(False)
    return held
