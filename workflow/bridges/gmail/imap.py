"""IMAP client: the few verbs the bridge needs, over imaplib, for Gmail and every other provider.

Login with a password (from an env var or a file) or XOAUTH2 (a token command's output).
Labels go on the server as Gmail's X-GM-LABELS when it offers X-GM-EXT-1, else as an IMAP
keyword (``todo``). Archiving moves a message out of INBOX (Gmail: remove the \\Inbox label;
elsewhere: UID MOVE, or COPY + \\Deleted + UID EXPUNGE), keywords travel with it.
"""

from __future__ import annotations

import imaplib
import os
import re
import select
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from workflow.core.config import GmailConfig
from workflow.core.errors import BridgeError

TIMEOUT = 30.0


class Fetched(NamedTuple):
    uid: int
    raw: bytes
    flags: tuple[str, ...]
    labels: tuple[str, ...]  # Gmail labels, or the keywords elsewhere


def secret(s: GmailConfig) -> str:
    """The password for ``s.user``, from the environment variable or the file the config names."""
    if s.password_env:
        value = os.environ.get(s.password_env)
        if not value:
            raise BridgeError(f"${s.password_env} is not set (the IMAP password for {s.user})")
        return value
    if s.password_file:
        try:
            return Path(s.password_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as e:
            raise BridgeError(f"cannot read the IMAP password file {s.password_file}: {e.strerror}") from None
    raise BridgeError("no IMAP credentials: set password_env, password_file or xoauth2_command")


class Imap:
    """One logged-in IMAP connection; use as a context manager."""

    def __init__(self, s: GmailConfig) -> None:
        self.s = s
        try:
            self.c: imaplib.IMAP4 = (imaplib.IMAP4_SSL if s.imap_tls else imaplib.IMAP4)(
                s.imap_host, s.imap_port, timeout=TIMEOUT
            )
        except OSError as e:
            raise BridgeError(f"cannot reach IMAP server {s.imap_host}:{s.imap_port}: {e}") from None
        try:
            if s.xoauth2_command:
                token = subprocess.run(
                    shlex.split(s.xoauth2_command), capture_output=True, text=True, check=True, timeout=60
                ).stdout.strip()
                auth = f"user={s.user}\x01auth=Bearer {token}\x01\x01".encode()
                self.c.authenticate("XOAUTH2", lambda _: auth)
            else:
                self.c.login(s.user, secret(s))
        except (imaplib.IMAP4.error, subprocess.SubprocessError, OSError) as e:
            raise BridgeError(f"IMAP login as {s.user} on {s.imap_host} failed: {e}") from None
        self.caps = {c.upper() for c in self.c.capabilities}
        self.folder: str | None = None

    def __enter__(self) -> Imap:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.c.logout()
        except (imaplib.IMAP4.error, OSError):
            pass

    @property
    def gmail(self) -> bool:
        return "X-GM-EXT-1" in self.caps

    def _ok(self, typ: str, data: Any, what: str) -> Any:
        if typ != "OK":
            raise BridgeError(f"IMAP {what} failed: {data!r}")
        return data

    def select(self, folder: str) -> int:
        """Select a folder; returns its UIDVALIDITY."""
        typ, data = self.c.select(_quote(folder))
        self._ok(typ, data, f"SELECT {folder}")
        self.folder = folder
        code = self.c.response("UIDVALIDITY")[1]
        return int(code[0]) if code and code[0] else 0

    def search(self, criteria: str) -> list[int]:
        typ, data = self.c.uid("SEARCH", criteria)
        return [int(x) for x in (self._ok(typ, data, f"SEARCH {criteria}")[0] or b"").split()]

    def fetch(self, uids: Sequence[int]) -> list[Fetched]:
        if not uids:
            return []
        items = "(UID FLAGS X-GM-LABELS BODY.PEEK[])" if self.gmail else "(UID FLAGS BODY.PEEK[])"
        typ, data = self.c.uid("FETCH", ",".join(str(u) for u in uids), items)
        out = []
        for part in self._ok(typ, data, "FETCH"):
            if not isinstance(part, tuple):
                continue
            meta = part[0].decode("ascii", "replace")
            uid = int(re.search(r"UID (\d+)", meta).group(1))  # type: ignore[union-attr]
            flags = tuple(re.search(r"FLAGS \(([^)]*)\)", meta).group(1).split()) if "FLAGS (" in meta else ()  # type: ignore[union-attr]
            labels: tuple[str, ...] = ()
            m = re.search(r"X-GM-LABELS \(([^)]*)\)", meta)
            if m:
                labels = tuple(x.strip('"') for x in re.findall(r'"[^"]*"|\S+', m.group(1)))
            else:
                labels = tuple(f for f in flags if not f.startswith("\\"))
            out.append(Fetched(uid, part[1], flags, labels))
        return out

    def labels(self, uid: int) -> tuple[str, ...]:
        items = "(FLAGS X-GM-LABELS)" if self.gmail else "(FLAGS)"
        typ, data = self.c.uid("FETCH", str(uid), items)
        meta = " ".join(d.decode() if isinstance(d, bytes) else str(d) for d in self._ok(typ, data, "FETCH") if d)
        m = re.search(r"X-GM-LABELS \(([^)]*)\)", meta)
        if m:
            return tuple(x.strip('"') for x in re.findall(r'"[^"]*"|\S+', m.group(1)))
        f = re.search(r"FLAGS \(([^)]*)\)", meta)
        return tuple(x for x in (f.group(1).split() if f else []) if not x.startswith("\\"))

    def add_label(self, uid: int, label: str) -> None:
        if self.gmail:
            typ, data = self.c.uid("STORE", str(uid), "+X-GM-LABELS", f'("{label}")')
        else:
            typ, data = self.c.uid("STORE", str(uid), "+FLAGS", f"({label})")
        self._ok(typ, data, f"label {label}")

    def archive(self, uid: int, folder: str) -> None:
        """Out of INBOX, labels kept."""
        if self.gmail:
            typ, data = self.c.uid("STORE", str(uid), "-X-GM-LABELS", "(\\Inbox)")
            self._ok(typ, data, "archive")
            return
        if "MOVE" in self.caps:
            typ, data = self.c.uid("MOVE", str(uid), _quote(folder))
            self._ok(typ, data, f"MOVE to {folder}")
            return
        self._ok(*self.c.uid("COPY", str(uid), _quote(folder)), f"COPY to {folder}")
        self._ok(*self.c.uid("STORE", str(uid), "+FLAGS", "(\\Deleted)"), "STORE \\Deleted")
        self._ok(*self.c.uid("EXPUNGE", str(uid)), "UID EXPUNGE")

    def idle(self, timeout: float, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait up to ``timeout`` in IMAP IDLE (RFC 2177) on the selected folder; True when the
        server announced new mail. Without IDLE on the server, just wait."""
        end = time.monotonic() + timeout
        if "IDLE" not in self.caps:
            while time.monotonic() < end and not stop():
                time.sleep(0.2)
            return False
        tag = self.c._new_tag()
        self.c.send(tag + b" IDLE\r\n")
        if not self.c.readline().startswith(b"+"):
            raise BridgeError("IMAP IDLE refused")
        news = False
        sock = self.c.socket()
        while time.monotonic() < end and not stop() and not news:
            ready, _, _ = select.select([sock], [], [], min(0.5, max(0.0, end - time.monotonic())))
            if ready:
                line = self.c.readline()
                if not line:
                    raise BridgeError("IMAP connection closed during IDLE")
                news = b"EXISTS" in line or b"RECENT" in line
        self.c.send(b"DONE\r\n")
        while True:
            line = self.c.readline()
            if not line or line.startswith(tag):
                break
        return news

    def find(self, message_id: str) -> int | None:
        """The UID of a message in the selected folder, by Message-ID."""
        mid = message_id.replace('"', "")
        uids = self.search(f'HEADER Message-ID "{mid}"')
        return uids[-1] if uids else None


def _quote(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'
