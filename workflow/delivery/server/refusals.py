"""Refusals: one line in the server's log for every refused AUTH, MAIL, RCPT, DATA or XNOTIFY.

The owner reads it to see why a person's mail client failed, and a fail2ban filter
(``contrib/fail2ban/filter.d/workflow-smtpd.conf``) matches it, so its shape is a contract::

    refused COMMAND from PEER login=LOGIN code=CODE rule=RULE: REASON

PEER is the client's IP address (``[local]`` on the owner's and runs' socket, which no
``<HOST>`` matches); LOGIN the login the connection gave or logged in as, ``-`` when none; CODE
the SMTP reply code; RULE the named rule that refused (``internal-members-only``,
``sender-identity``, a guardrail's name), ``-`` when no rule did; REASON the reply's text. Every
field a peer could have chosen comes after PEER and is sanitized (no CR, LF or other control
characters; LOGIN has no spaces either), so no peer can forge a line or move the address a filter
reads.

Each refusal is also counted (``Counted``), by command, code and rule, in the state directory's
``refusals.sqlite``, which the cockpit's ``/metrics`` reads: a counter any process can read, that
lives across restarts.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from pathlib import Path

from workflow.core.db import open_db
from workflow.core.errors import WorkflowError

log = logging.getLogger("workflow.delivery.server.smtpd")  # the server's log

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
ENHANCED = re.compile(r"^\d\.\d{1,3}\.\d{1,3} ")  # the RFC 3463 status code after the reply code
LOCAL = "[local]"  # the peer of a connection on the Unix socket


def sanitize(text: object, limit: int = 200) -> str:
    """Peer-supplied text made safe for one log line (no CR, LF or other control characters)."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    if not (s.isascii() and s.isprintable()):  # printable ASCII (the common case) has none
        s = CONTROL.sub("?", s[: limit + 1])
    return s[:limit] + ("…" if len(s) > limit else "")


def peer_of(peer: object) -> str:
    """The client's address as aiosmtpd's ``session.peer`` holds it (a TCP (host, port) tuple,
    or the empty name of a Unix socket's peer)."""
    if isinstance(peer, tuple) and peer:
        return sanitize(peer[0], 64)
    return LOCAL


def split(reply: str) -> tuple[str, str]:
    """A reply's code and its text without the enhanced status code."""
    code, _, text = reply.partition(" ")
    return code, ENHANCED.sub("", text)


def refused(command: str, peer: str, login: str | None, reply: str, rule: str = "") -> str:
    """Log the refusal ``reply`` to ``command`` (one line, INFO) and return the reply."""
    code, text = split(reply)
    name = sanitize(login, 100).replace(" ", "?") if login else "-"
    log.info(
        "refused %s from %s login=%s code=%s rule=%s: %s",
        command,
        peer,
        name or "-",
        code,
        sanitize(rule, 80).replace(" ", "?") if rule else "-",
        sanitize(text, 400),
    )
    return reply


COUNTS = """
CREATE TABLE IF NOT EXISTS refused(command TEXT NOT NULL, code TEXT NOT NULL, rule TEXT NOT NULL,
  n INTEGER NOT NULL, PRIMARY KEY (command, code, rule));
"""


class Counted(logging.Handler):
    """Counts the server log's refusal lines (``refused``) into ``path``; a count that cannot be
    written is lost, never the refusal's reply."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self.path = path
        self.db: sqlite3.Connection | None = None
        self.db_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if not (isinstance(record.msg, str) and record.msg.startswith("refused ")) or not isinstance(
            record.args, tuple
        ):
            return
        if len(record.args) != 6:
            return
        command, _peer, _login, code, rule, _text = (str(a) for a in record.args)
        try:
            with self.db_lock:
                if self.db is None:
                    self.db = open_db(self.path, what="refusal counts", schema=COUNTS)
                self.db.execute(
                    "INSERT INTO refused(command, code, rule, n) VALUES (?,?,?,1) "
                    "ON CONFLICT(command, code, rule) DO UPDATE SET n = n + 1",
                    (command, code, rule),
                )
        except (WorkflowError, sqlite3.Error):
            return

    def close(self) -> None:
        with self.db_lock:
            if self.db is not None:
                self.db.close()
                self.db = None
        super().close()


def counts(path: Path) -> list[tuple[str, str, str, int]]:
    """(command, code, rule, how many) of every refusal counted in ``path`` (none before the first)."""
    if not path.exists():
        return []
    try:
        db = open_db(path, what="refusal counts", schema=COUNTS)
    except WorkflowError:
        return []
    try:
        return [(str(c), str(k), str(r), int(n)) for c, k, r, n in db.execute("SELECT * FROM refused ORDER BY 1, 2, 3")]
    except sqlite3.Error:
        return []
    finally:
        db.close()
