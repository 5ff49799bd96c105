"""Local: the SMTP server's Unix socket in the state directory — where the owner and runs log in.

A TCP port on loopback is anyone's to listen on: a process of the owner's uid (an agent in its
sandbox shares the network) can take the port while no server runs, or join an SO_REUSEPORT
group, and relay a client's challenge-response to the real server, then speak on the
authenticated connection as the owner. A socket file in ``<state>/sock/`` (0700, the state
directory hidden from every sandbox) cannot be squatted that way: only the owner's processes
reach the directory, and a sandbox sees it read-only, so no agent can put a socket of its own in
its place. So the owner's and runs' ``X-WORKFLOW`` logins are offered here and refused on TCP;
TCP is for people's logins.

* ``listen(path)``: a listening socket at ``path``, refusing one a live server holds and
  replacing a stale one (a server killed before it removed it); ``claim``: the same, its
  refusal a ConfigError for the server's user (``workflow web`` claims ``<state>/sock/web``
  for the owner's login links the same way).
* ``connect(path, timeout)``: a connected socket (paths longer than a socket address may hold are
  reached through ``/proc/self/fd``).
* ``peer_uid(sock)``: the uid of the process at the other end (``SO_PEERCRED``).
* ``answers(path)``: whether a server listens there now.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

from workflow.core.errors import ConfigError

SHORT = 100  # bytes of a path a socket address always holds (sun_path is 108 with the NUL)


def _call(path: str, act: object) -> None:
    """``act(where)`` with ``path``, or with ``/proc/self/fd/N/NAME`` when ``path`` is too long."""
    if len(os.fsencode(path)) <= SHORT:
        act(path)  # type: ignore[operator]
        return
    parent, _, name = path.rpartition("/")
    fd = os.open(parent or "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        act(f"/proc/self/fd/{fd}/{name}")  # type: ignore[operator]
    finally:
        os.close(fd)


def connect(path: str, timeout: float) -> socket.socket:
    """A stream connected to the server at ``path``; OSError (FileNotFoundError,
    ConnectionRefusedError: no server) otherwise."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        _call(path, sock.connect)
    except BaseException:
        sock.close()
        raise
    return sock


def answers(path: str, timeout: float = 2.0) -> bool:
    """Whether a server listens at ``path`` now."""
    try:
        connect(path, timeout).close()
    except OSError:
        return False
    return True


def listen(path: str, backlog: int = 128) -> socket.socket:
    """Listen at ``path`` (its directory made 0700); OSError(EADDRINUSE) when a server listens there."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    os.chmod(parent, 0o700)
    if os.path.lexists(path):
        if answers(path):
            raise OSError(errno.EADDRINUSE, "a server listens on this socket", path)
        os.unlink(path)  # left by a server that died: nothing answers it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # never os.umask here: it is the process's, and a thread making a folder meanwhile (a panel's
        # members start their runs at once) would get it 0600, which no sandboxed agent can enter
        _call(path, sock.bind)
        os.chmod(path, 0o600)  # its folder is 0700: nobody else reached it before this
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def claim(path: str, server: str = "workflow smtpd") -> socket.socket:
    """``listen`` for a ``server`` of the mail root: ConfigError, naming the socket, when another
    listens there or it cannot be made."""
    try:
        return listen(path)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"another server of this mail root listens on {path}: stop it first (one {server} per mail root)"
            ) from None
        raise ConfigError(f"cannot listen on {path}: {e.strerror or e}") from None


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the socket file at ``path``, to remove only the one we made."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def remove(path: str, made: tuple[int, int] | None) -> None:
    """Remove the socket file at ``path`` if it is still the one ``made`` (``identity``)."""
    if made is not None and identity(path) == made:
        try:
            os.unlink(path)
        except OSError:
            pass


def peer_uid(sock: object) -> int | None:
    """The uid of the process connected at the other end of a Unix ``sock``, or None."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))  # type: ignore[attr-defined]
        return int(struct.unpack("3i", raw)[1])
    except (AttributeError, OSError, struct.error, TypeError):
        return None
