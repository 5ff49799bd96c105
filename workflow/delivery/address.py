"""Address: where this mail root's SMTP server listens, and who holds a port we cannot have.

``workflow smtpd`` and ``workflow up`` record the address they actually listen on in the state
directory (``smtpd.json``: host, port, pid) and remove it when they stop, so a server started
with ``--port 2525`` is found by every other command although ``[smtp] port`` says 8025.
``server`` is that address while its process lives, else the configured one. ``holder`` names
the process listening on a TCP port (from /proc), for a one-line "port in use" error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from workflow.core.config import Config
from workflow.core.errors import ConfigError
from workflow.core.files import write_atomic


def record(config: Config, host: str, port: int) -> None:
    write_atomic(config.state.smtpd, json.dumps({"host": host, "port": port, "pid": os.getpid()}))


def forget(config: Config) -> None:
    try:
        data = json.loads(config.state.smtpd.read_text(encoding="utf-8"))
        if data.get("pid") == os.getpid():
            config.state.smtpd.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


def server(config: Config) -> tuple[str, int]:
    """(host, port) of the mail root's server: the recorded one while its process lives, else
    ``[smtp] host`` and ``port``."""
    try:
        data = json.loads(config.state.smtpd.read_text(encoding="utf-8"))
        pid, host, port = int(data["pid"]), str(data["host"]), int(data["port"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return config.smtp.host, config.smtp.port
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return host, port


def in_use(host: str, port: int) -> ConfigError:
    """The one-line refusal of a port something else listens on, naming what holds it."""
    return ConfigError(
        f"port {port} on {host} is in use by {holder(port)}: stop it, or pick another with --port (0 picks a free one)"
    )


def holder(port: int) -> str:
    """Who listens on TCP ``port`` here: "pid N (command line)", or "another process"."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f[9])
    if not inodes:
        return "another process"
    wanted = {f"socket:[{i}]" for i in inodes}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted for fd in fds):
                pid, cmd = _first_of_kind(pid)
                return f"pid {pid} ({cmd[:120]})"
        except OSError:
            continue
    return "another process (not one of yours)"


def _command(pid: str) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


def _first_of_kind(pid: str) -> tuple[str, str]:
    """The process and its command line, or its parent's when that runs the same command (the
    worker of ``workflow smtpd --workers`` listens; the server is its parent)."""
    cmd = _command(pid)
    try:
        parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        if _command(parent) == cmd:
            return parent, cmd
    except (OSError, IndexError):
        pass
    return pid, cmd
