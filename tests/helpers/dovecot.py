"""A real Dovecot IMAP server in a tmp dir on a loopback port (TESTING-NOTES' recipe), for bridge tests."""

from __future__ import annotations

import imaplib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from helpers.tiers import spawning
from workflow.ops.imap import imap_only

USER = "me@example.com"
PASSWORD = "app-password"


def available() -> str | None:
    """None when Dovecot can run here, else why not."""
    if shutil.which("dovecot") is None or shutil.which("doveadm") is None:
        return "dovecot is not installed (apt-get install dovecot-imapd; .ci/run installs it)"
    if os.geteuid() != 0:
        return "the Dovecot fixture needs root (it runs its mail processes as nobody)"
    return None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@spawning
class Dovecot:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = _port()
        self.mail = base / "mail"
        for d in ("run", "state", "mail"):
            (base / d).mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o755)
        (base / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}:65534:65534::{self.mail}::\n")
        self.conf = base / "dovecot.conf"
        self.conf.write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
first_valid_uid = 100
first_valid_gid = 100
mail_location = maildir:{self.mail}
mail_uid = 65534
mail_gid = 65534
passdb {{
  driver = passwd-file
  args = {base}/passwd
}}
userdb {{
  driver = passwd-file
  args = {base}/passwd
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Archive {{
    special_use = \\Archive
    auto = create
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = create
  }}
}}
{imap_only(self.port)}service lmtp {{
  unix_listener lmtp {{
    mode = 0666
  }}
}}
""")
        subprocess.run(["chown", "-R", "65534:65534", str(self.mail)], check=True)

    def start(self) -> Dovecot:
        subprocess.run(["dovecot", "-c", str(self.conf)], check=True)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                c = imaplib.IMAP4("127.0.0.1", self.port, timeout=2)
                c.login(USER, PASSWORD)
                c.logout()
                return self
            except (OSError, imaplib.IMAP4.error):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"dovecot did not start: {(self.base / 'dovecot.log').read_text() if (self.base / 'dovecot.log').exists() else ''}"
        )

    def stop(self) -> None:
        subprocess.run(["doveadm", "-c", str(self.conf), "stop"], check=False, capture_output=True)

    def client(self) -> imaplib.IMAP4:
        c = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        c.login(USER, PASSWORD)
        return c

    def append(self, raw: bytes, folder: str = "INBOX", flags: str = "") -> None:
        c = self.client()
        try:
            typ, data = c.append(folder, flags or None, None, raw)
            assert typ == "OK", data
        finally:
            c.logout()

    def uids(self, folder: str = "INBOX", criteria: str = "ALL") -> list[int]:
        c = self.client()
        try:
            c.select(folder)
            typ, data = c.uid("SEARCH", criteria)
            return [int(x) for x in (data[0] or b"").split()]
        finally:
            c.logout()

    def keywords(self, uid: int, folder: str = "INBOX") -> str:
        c = self.client()
        try:
            c.select(folder)
            typ, data = c.uid("FETCH", str(uid), "(FLAGS)")
            return (data[0] or b"").decode() if isinstance(data[0], bytes) else str(data[0])
        finally:
            c.logout()
