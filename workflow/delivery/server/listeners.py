"""Listeners: where a server may listen — loopback by default; any other address only with AUTH
required and STARTTLS set up, and AUTH offered only after STARTTLS there (``tls_context``); the
port the workers share (``reserve``); and a loopback port held on both families
(``reserve_loopback``), so no other process takes the one a client's ``localhost`` tries first."""

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
        return _listen(host, port)
    except OSError as e:
        raise _refusal(host, port, e) from None


LOOPBACKS = ("127.0.0.1", "::1")  # the address each family's ``localhost`` names
TRIES = 20  # free ports tried for port 0 before giving up (each must be free on every family)


def loopback_addresses(host: str) -> tuple[str, ...]:
    """The addresses a server on loopback ``host`` holds its port on: ``host``'s own address
    first (``localhost``: 127.0.0.1), then 127.0.0.1 and ::1 — a client that names ``localhost``
    may try either family first, and any process may listen on the one left free."""
    name = host.strip().strip("[]")
    try:
        first = str(ipaddress.ip_address(name))
    except ValueError:
        try:
            first = str(socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)[0][4][0]).split("%")[0]
        except (OSError, UnicodeError, IndexError):
            first = LOOPBACKS[0]
    if not ipaddress.ip_address(first).is_loopback:
        first = LOOPBACKS[0]
    return tuple(dict.fromkeys((first, *LOOPBACKS)))


def reserve_loopback(host: str, port: int) -> list[socket.socket]:
    """Listen on ``port`` at every address of ``loopback_addresses(host)`` (port 0: one free at
    all of them), or refuse — ConfigError naming the address and who holds it — when any is
    taken: a server that held one family would leave the other to whoever binds it. An address
    the host does not have (no IPv6 loopback) is skipped: nobody else can listen there either."""
    addresses = loopback_addresses(host)
    for _ in range(TRIES if port == 0 else 1):
        held: list[socket.socket] = []
        chosen = port
        try:
            for where in addresses:
                try:
                    held.append(_listen(where, chosen))
                except OSError as e:
                    if where != addresses[0] and e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                        continue
                    raise
                chosen = held[0].getsockname()[1]
            return held
        except OSError as e:
            for sock in held:  # let go first: ``holder`` names who holds the port, never this process
                sock.close()
            if not (port == 0 and e.errno == errno.EADDRINUSE and held):
                raise _refusal(where, chosen, e) from None
    raise ConfigError(f"cannot find a port free on {' and '.join(addresses)} after {TRIES} tries: pick one with --port")


def _listen(host: str, port: int) -> socket.socket:
    """A listening, non-blocking, non-inheritable socket on ``host:port``; OSError otherwise."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except UnicodeError as e:
        raise OSError(errno.EINVAL, str(e)) from None
    held = socket.socket(family, kind, proto)
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does: TIME_WAIT is no holder
        held.bind(where)
        held.listen(1024)
    except OSError:
        held.close()
        raise
    held.setblocking(False)
    held.set_inheritable(False)
    return held


def _refusal(host: str, port: int, e: OSError) -> ConfigError:
    if e.errno == errno.EADDRINUSE:
        return address.in_use(host, port)
    return ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}")
