"""IMAP: a Dovecot configuration serving the Maildirs to human roles, one login each (``workflow imap``).

Any mail client becomes a role's client: a login of ``[smtp] auth_users_file`` reads its role's
Maildir over IMAP (Dovecot) and answers through ``workflow smtpd`` with the same login and
password — one file, ``{PBKDF2}`` secrets both servers verify. A login sees only its role's
mailbox (its first role, when it has several): the Maildir is its IMAP home and INBOX, nothing
else is reachable. Dovecot keeps its own index files outside the Maildirs (``DIR/index``) and reads
mail as the owner of the mail root, never as root.
"""

from __future__ import annotations

import grp
import os
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.delivery.credentials import PBKDF2, load_users

DOVECOT_GROUP = "dovecot"  # default_internal_user's group in Debian's package


def imap_only(port: int) -> str:
    """Dovecot's listeners: IMAP on ``port``, nothing else (no IMAPS, POP3 or submission)."""
    return f"""\
service imap-login {{
  inet_listener imap {{
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service pop3-login {{
  inet_listener pop3 {{
    port = 0
  }}
}}
service submission-login {{
  inet_listener submission {{
    port = 0
  }}
}}
"""


class Served(NamedTuple):
    login: str
    role: str
    maildir: Path


class Setup(NamedTuple):
    files: dict[str, str]  # file name in DIR → content
    served: list[Served]
    skipped: list[str]  # why a login is not served
    uid: int
    gid: int


def plan(app: App, directory: Path, port: int, listen: str = "127.0.0.1") -> Setup:
    """The configuration for ``directory`` (``dovecot.conf`` and its ``passwd``)."""
    cfg = app.config
    if not cfg.smtp.auth_users_file:
        raise WorkflowError(
            f"[smtp] auth_users_file is not set in {cfg.file}: add the logins of the people who "
            "read mail (login:SECRET:role, SECRET from `workflow smtpd --hash-password`)"
        )
    users = load_users(cfg.smtp.auth_users_file)
    try:
        st = cfg.mail_root.stat()
    except OSError as e:
        raise WorkflowError(f"{cfg.mail_root}: cannot read the mail root: {e.strerror}") from None
    if st.st_uid == 0:
        raise WorkflowError(
            f"{cfg.mail_root} belongs to root, and Dovecot never reads mail as root: run the workflow "
            "commands as the user who owns the mail (or chown -R it to that user)"
        )
    served, skipped, lines = [], [], []
    for login, user in sorted(users.items()):
        role = user.roles[0]
        if not user.secret.startswith(PBKDF2):
            skipped.append(
                f"{login}: its secret is scrypt, which Dovecot cannot check; make a new one with --hash-password"
            )
            continue
        if role not in app.roster.roles:
            skipped.append(f"{login}: {role} is not a role with a mailbox")
            continue
        maildir = cfg.mail_root / role
        served.append(Served(login, role, maildir))
        lines.append(f"{login}:{user.secret}:{st.st_uid}:{st.st_gid}::{maildir}::")
    d = directory.resolve()
    tls = ""
    if cfg.smtp.tls_cert and cfg.smtp.tls_key:
        tls = f"ssl = required\nssl_cert = <{cfg.smtp.tls_cert}\nssl_key = <{cfg.smtp.tls_key}\n"
    elif listen not in ("127.0.0.1", "::1", "localhost"):
        raise WorkflowError(f"refusing to serve IMAP on {listen} without TLS: set [smtp] tls_cert and tls_key")
    else:
        tls = "ssl = no\ndisable_plaintext_auth = no\n"
    conf = f"""\
# Dovecot for the workflow-mail project {cfg.project_dir} (made by `workflow imap`).
# Start: dovecot -c {d}/dovecot.conf    Stop: doveadm -c {d}/dovecot.conf stop
protocols = imap
listen = {listen}
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
{tls}auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
first_valid_uid = {min(st.st_uid, 100)}
first_valid_gid = {min(st.st_gid, 100)}
mail_uid = {st.st_uid}
mail_gid = {st.st_gid}
# each login's home is its role's Maildir; Dovecot's own files stay out of it
mail_location = maildir:~:INDEX={d}/index/%u:CONTROL={d}/index/%u
passdb {{
  driver = passwd-file
  args = {d}/passwd
}}
userdb {{
  driver = passwd-file
  args = {d}/passwd
}}
namespace inbox {{
  inbox = yes
  separator = /
}}
{imap_only(port)}"""
    return Setup(
        {"dovecot.conf": conf, "passwd": "".join(f"{line}\n" for line in lines)}, served, skipped, st.st_uid, st.st_gid
    )


def write(setup: Setup, directory: Path) -> list[str]:
    """Write the files and the directories Dovecot needs (its index owned by the mail's owner);
    returns what the user must still do."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o711)  # Dovecot's processes pass through to passwd and run/; nobody lists it
    for sub in ("run", "state"):
        (directory / sub).mkdir(exist_ok=True)
        os.chmod(directory / sub, 0o755)  # Dovecot's own sockets and state, for its unprivileged processes
    index = directory / "index"
    index.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(index, setup.uid, setup.gid)
    for name, text in setup.files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        os.chmod(path, 0o640 if name == "passwd" else 0o644)
    todo = []
    try:  # Dovecot's auth process reads the logins as its own user, through the group
        os.chown(directory / "passwd", -1, grp.getgrnam(DOVECOT_GROUP).gr_gid)
    except (KeyError, PermissionError):
        todo.append(f"let Dovecot read the logins: sudo chgrp {DOVECOT_GROUP} {directory / 'passwd'}")
    for s in setup.served:
        for sub in ("", "new", "cur", "tmp"):
            d = s.maildir / sub
            if not d.exists():
                d.mkdir(parents=True)
                if os.geteuid() == 0:
                    os.chown(d, setup.uid, setup.gid)
    return todo
