"""IMAP client: the few verbs the bridge needs, over IMAPClient, for Gmail and every other provider.

Login with a password (from an env var or a file) or XOAUTH2 (a token command's output).
Labels go on the server as Gmail's X-GM-LABELS when it offers X-GM-EXT-1, else as an IMAP
keyword (``todo``). Archiving moves a message out of INBOX (Gmail: remove the \\Inbox label;
elsewhere: UID MOVE, or COPY + \\Deleted + UID EXPUNGE), keywords travel with it, and says the
UID the message has in the archive (COPYUID from UIDPLUS, else found again by Message-ID).
Special-use folders (RFC 6154: \\Sent, \\All, \\Archive) are looked up by their flag.
"""

from __future__ import annotations

import imaplib
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import imapclient  # type: ignore[import-untyped]
from imapclient.exceptions import IMAPClientError  # type: ignore[import-untyped]

from workflow.bridges.gmail.settings import GmailConfig
from workflow.core.errors import BridgeError

TIMEOUT = 30.0
T = TypeVar("T")
COPYUID_RE = re.compile(rb"COPYUID (\d+) \S+ (\S+)")


class Fetched(NamedTuple):
    uid: int
    raw: bytes
    flags: tuple[str, ...]
    labels: tuple[str, ...]  # Gmail labels, or the keywords elsewhere
    thread_id: int | None = None  # Gmail's X-GM-THRID


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


def _text(v: object) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class Imap:
    """One logged-in IMAP connection; use as a context manager."""

    def __init__(self, s: GmailConfig) -> None:
        self.s = s
        try:
            self.c = imapclient.IMAPClient(s.imap_host, s.imap_port, ssl=s.imap_tls, timeout=TIMEOUT)
        except (OSError, IMAPClientError) as e:
            raise BridgeError(f"cannot reach IMAP server {s.imap_host}:{s.imap_port}: {e}") from None
        try:
            if s.xoauth2_command:
                token = subprocess.run(
                    shlex.split(s.xoauth2_command), capture_output=True, text=True, check=True, timeout=60
                ).stdout.strip()
                self.c.oauth2_login(s.user, token)
            else:
                self.c.login(s.user, secret(s))
            self.caps = {_text(c).upper() for c in self.c.capabilities()}
        except (IMAPClientError, imaplib.IMAP4.error, subprocess.SubprocessError, OSError) as e:
            self._close()
            raise BridgeError(f"IMAP login as {s.user} on {s.imap_host} failed: {e}") from None
        self.folder: str | None = None

    def __enter__(self) -> Imap:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        try:
            self.c.logout()
        except (IMAPClientError, imaplib.IMAP4.error, OSError):
            try:
                self.c.shutdown()
            except OSError:
                pass

    def _do(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (IMAPClientError, imaplib.IMAP4.error, OSError) as e:
            raise BridgeError(f"IMAP {what} failed: {e}") from None

    @property
    def gmail(self) -> bool:
        return "X-GM-EXT-1" in self.caps

    def select(self, folder: str) -> int:
        """Select a folder; returns its UIDVALIDITY."""
        info = self._do(f"SELECT {folder}", lambda: self.c.select_folder(folder))
        self.folder = folder
        return int(info.get(b"UIDVALIDITY", 0))

    def status(self, folder: str) -> tuple[int, int]:
        """(UIDVALIDITY, UIDNEXT) of a folder, without selecting it."""
        info = self._do(f"STATUS {folder}", lambda: self.c.folder_status(folder, [b"UIDVALIDITY", b"UIDNEXT"]))
        return int(info.get(b"UIDVALIDITY", 0)), int(info.get(b"UIDNEXT", 0))

    def special(self, flag: str) -> str | None:
        """The folder carrying a special-use flag (``\\Sent``, ``\\All``, ``\\Archive``), if any."""
        found = self._do(f"LIST {flag}", lambda: self.c.find_special_folder(flag.encode()))
        return _text(found) if found else None

    def search(self, criteria: str) -> list[int]:
        return sorted(int(u) for u in self._do(f"SEARCH {criteria}", lambda: self.c.search(criteria)))

    def fetch(self, uids: Sequence[int]) -> list[Fetched]:
        if not uids:
            return []
        items = [b"FLAGS", b"BODY.PEEK[]"] + ([b"X-GM-LABELS", b"X-GM-THRID"] if self.gmail else [])
        data: dict[int, dict[bytes, Any]] = self._do("FETCH", lambda: self.c.fetch(list(uids), items))
        out = []
        for uid in sorted(data):
            d = data[uid]
            if b"BODY[]" not in d:
                continue
            flags = tuple(_text(f) for f in d.get(b"FLAGS", ()))
            out.append(Fetched(int(uid), bytes(d[b"BODY[]"]), flags, self._labels(d, flags), d.get(b"X-GM-THRID")))
        return out

    def _labels(self, d: dict[bytes, Any], flags: tuple[str, ...]) -> tuple[str, ...]:
        if self.gmail:
            return tuple(_text(lb) for lb in d.get(b"X-GM-LABELS", ()))
        return tuple(f for f in flags if not f.startswith("\\"))

    def labels(self, uid: int) -> tuple[str, ...]:
        items = [b"FLAGS", b"X-GM-LABELS"] if self.gmail else [b"FLAGS"]
        d = self._do("FETCH", lambda: self.c.fetch([uid], items)).get(uid, {})
        return self._labels(d, tuple(_text(f) for f in d.get(b"FLAGS", ())))

    def add_label(self, uid: int, label: str) -> None:
        if self.gmail:
            self._do(f"label {label}", lambda: self.c.add_gmail_labels([uid], [label], silent=True))
        else:
            self._do(f"label {label}", lambda: self.c.add_flags([uid], [label], silent=True))

    def archive(self, uid: int, folder: str) -> int | None:
        """Out of INBOX (the selected folder), labels kept. Returns the message's UID in ``folder``
        when the server says it (COPYUID) or it can be found there again; None on Gmail."""
        if self.gmail:
            self._do("archive", lambda: self.c.remove_gmail_labels([uid], ["\\Inbox"], silent=True))
            return None
        mid = self._message_id(uid)
        untagged = self.c._imap.untagged_responses
        untagged.pop("COPYUID", None)
        if "MOVE" in self.caps:
            said = self._do(f"MOVE to {folder}", lambda: self.c.move([uid], folder))
            said = b" ".join([*untagged.pop("COPYUID", []), said if isinstance(said, bytes) else b""])
        else:
            said = self._do(f"COPY to {folder}", lambda: self.c.copy([uid], folder))
            self._do("STORE \\Deleted", lambda: self.c.add_flags([uid], [b"\\Deleted"], silent=True))
            if "UIDPLUS" in self.caps:
                self._do("UID EXPUNGE", lambda: self.c.uid_expunge([uid]))
            else:
                self._do("EXPUNGE", lambda: self.c.expunge())
        m = COPYUID_RE.search(said if isinstance(said, bytes) else b"COPYUID " + said)
        if m and m.group(2).isdigit():
            return int(m.group(2))
        if not mid:
            return None
        back = self.folder or "INBOX"
        self.select(folder)
        try:
            return self.find(mid)
        finally:
            self.select(back)

    def _message_id(self, uid: int) -> str:
        d = self._do("FETCH", lambda: self.c.fetch([uid], [b"BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"])).get(uid, {})
        raw = next((v for k, v in d.items() if k.startswith(b"BODY[HEADER")), b"")
        m = re.search(rb"<[^<>\s]+>", raw or b"")
        return m.group(0).decode("ascii", "replace") if m else ""

    def idle(self, timeout: float, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait up to ``timeout`` in IMAP IDLE (RFC 2177) on the selected folder; True when the
        server announced new mail. Without IDLE on the server, just wait."""
        end = time.monotonic() + timeout
        if "IDLE" not in self.caps:
            while time.monotonic() < end and not stop():
                time.sleep(0.2)
            return False
        self._do("IDLE", self.c.idle)
        news = False
        try:
            while time.monotonic() < end and not stop() and not news:
                said = self._do("IDLE", lambda: self.c.idle_check(min(0.5, max(0.0, end - time.monotonic()))))
                news = any(len(r) > 1 and r[1] in (b"EXISTS", b"RECENT") for r in said)
        finally:
            try:
                self.c.idle_done()
            except (IMAPClientError, imaplib.IMAP4.error, OSError):
                pass
        return news

    def find(self, message_id: str) -> int | None:
        """The UID of a message in the selected folder, by Message-ID."""
        uids = self.search_header("Message-ID", message_id)
        return uids[-1] if uids else None

    def search_header(self, name: str, value: str) -> list[int]:
        """UIDs in the selected folder whose header ``name`` contains ``value``."""
        v = value.replace('"', "").replace("\\", "")
        return self.search(f'HEADER {name} "{v}"')
