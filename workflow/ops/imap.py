"""IMAP: a Dovecot configuration serving the Maildirs to human roles, one login each (``workflow imap``).

Any mail client becomes a role's client: a login of ``[smtp] auth_users_file`` reads its role's
Maildir over IMAP (Dovecot) and answers through ``workflow smtpd`` with the same login and
password — one file, ``{PBKDF2}`` secrets both servers verify. A login sees only its role's
mailbox (its first role, when it has several): the Maildir is its INBOX, nothing else is reachable.

Dovecot runs *rootless*: the owner of the mail root starts it, and every one of its processes
(login, auth, mail) runs as that owner, so the logins file stays the owner's only (0600 in a
0700 directory) and nobody needs sudo. A project run by root is served too: Dovecot never reads
mail as root, so its mail processes run as a system user made for it (``ops.mailuser``), its login
processes as Dovecot's own users, and its auth as root (the logins file stays root's). Its passdb reads the users file itself, and Dovecot reads
a passwd-file again whenever it changes: a new password or a removed login counts at once. Which
Maildir a login reads (``homes``) is written here; a new login needs this command run again,
never a restart.

Mail enters a role's Maildir only through the server, which checks it. A global ACL gives every
login ``lrwste`` on its INBOX — read, flags, \\Seen, \\Deleted, expunge — and no ``i`` (APPEND,
COPY, MOVE into it) and no ``k`` (CREATE): a client's Sent copy is refused, never stored beside
the role's mail. ``acl_globals_only`` keeps Dovecot from reading an ACL file planted in a Maildir.
Dovecot's own files (index, control, ACL list) stay in DIR, out of the Maildirs.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.delivery.credentials import PBKDF2, load_people
from workflow.ops import mailuser

RIGHTS = "lrwste"  # lookup, read, write flags, write \Seen, write \Deleted, expunge: never insert or create
READ_ONLY = "lr"  # an agent role's mailbox: read, never mark (a copy marked read is one its run never sees)
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")  # Dovecot's master is here, often off an ordinary user's PATH


def imap_only(port: int, chroot: bool = True) -> str:
    """Dovecot's listeners: IMAP on ``port``, nothing else (no IMAPS, POP3 or submission).
    ``chroot=False`` for a Dovecot started without root (chroot needs root)."""
    login_chroot = "" if chroot else "  chroot =\n"
    anvil = "" if chroot else "service anvil {\n  chroot =\n}\n"
    return f"""\
service imap-login {{
{login_chroot}  inet_listener imap {{
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
{anvil}"""


def program(name: str) -> str:
    """The full path of a Dovecot program, so a printed line works from any user's PATH."""
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(name, path=path) or name


class Served(NamedTuple):
    login: str
    role: str
    maildir: Path
    read_only: bool = False  # the role is an agent's: the person may read its mail, never mark it


class Setup(NamedTuple):
    files: dict[str, str]  # file name in DIR → content
    served: list[Served]
    skipped: list[str]  # why a login is not served
    uid: int  # the mail root's owner, who runs Dovecot
    owner: str
    start: str  # the shell lines that start and stop this Dovecot
    stop: str
    mail_user: mailuser.MailUser | None = None  # root's project: who Dovecot reads its mail as
    mail_root: Path | None = None  # root's project: handed to mail_user (itself only)


def _as_root(mail_root: Path, st: os.stat_result, make: bool) -> mailuser.MailUser | None:
    """The mail user when root serves a mail root of root's (or one already handed to it); else None."""
    if os.geteuid() != 0:
        return None
    found = mailuser.find()
    if st.st_uid != 0 and (found is None or st.st_uid != found.uid):
        return None
    if found is not None:
        return found
    if not make:
        raise WorkflowError(
            f"{mail_root} belongs to root, and Dovecot never reads mail as root: `workflow imap --write DIR` "
            f"makes the system user {mailuser.NAME} it reads the mail as"
        )
    return mailuser.ensure()


def plan(app: App, directory: Path, port: int, listen: str = "127.0.0.1", make: bool = False) -> Setup:
    """The configuration for ``directory``: ``dovecot.conf``, ``homes`` (login → Maildir), ``acl``.
    ``make``: as root, make the mail user if there is none (``--write``)."""
    cfg = app.config
    users_file = cfg.smtp.auth_users_file
    if not users_file:
        raise WorkflowError(
            f"[smtp] auth_users_file is not set in {cfg.file}: add the logins of the people who "
            "read mail (login:SECRET:role, SECRET from `workflow smtpd --hash-password`)"
        )
    users = load_people(users_file, app.roster)
    try:
        st = cfg.mail_root.stat()
    except OSError as e:
        raise WorkflowError(f"{cfg.mail_root}: cannot read the mail root: {e.strerror}") from None
    reader = _as_root(cfg.mail_root, st, make)
    if reader is None and st.st_uid == 0:
        raise WorkflowError(
            f"{cfg.mail_root} belongs to root, and Dovecot never reads mail as root: run `workflow imap` "
            "as root (it makes a user for Dovecot), or as the user who owns the mail"
        )
    try:
        owner = pwd.getpwuid(st.st_uid)
    except KeyError:
        raise WorkflowError(f"{cfg.mail_root} belongs to uid {st.st_uid}, which has no name here") from None
    uid, gid = (reader.uid, reader.gid) if reader else (st.st_uid, st.st_gid)
    served, skipped, homes = [], [], []
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
        served.append(Served(login, role, maildir, app.roster.roles[role].mode != "human"))
        homes.append(f"{login}::{uid}:{gid}::{maildir}::\n")
    d = directory.expanduser().resolve()
    mail = mailuser.folder(d) if reader else d  # Dovecot's mail-side files: where its mail processes reach
    if cfg.smtp.tls_cert and cfg.smtp.tls_key:
        tls = f"ssl = required\nssl_cert = <{cfg.smtp.tls_cert}\nssl_key = <{cfg.smtp.tls_key}\n"
    elif listen not in ("127.0.0.1", "::1", "localhost"):
        raise WorkflowError(f"refusing to serve IMAP on {listen} without TLS: set [smtp] tls_cert and tls_key")
    else:
        tls = "ssl = no\ndisable_plaintext_auth = no\n"
    start = f"{program('dovecot')} -c {d}/dovecot.conf"
    stop = f"{program('doveadm')} -c {d}/dovecot.conf stop"
    conf = f"""\
# Dovecot for the workflow-mail project {cfg.project_dir} (made by `workflow imap`).
{_who(owner.pw_name, reader, uid, gid, st.st_gid)}
# Start: {start}    Stop: {stop}
protocols = imap
listen = {listen}
base_dir = {mail}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
{tls}auth_mechanisms = plain login
first_valid_uid = {uid}
last_valid_uid = {uid}
first_valid_gid = {gid}
last_valid_gid = {gid}
mail_uid = {uid}
mail_gid = {gid}
# INBOX is the role's Maildir (the login's home); Dovecot's own files stay in {mail}
mail_location = maildir:{mail}/folders/%u:INBOX=~:INDEX={mail}/index/%u:CONTROL={mail}/index/%u
mail_plugins = acl
protocol imap {{
  mail_plugins = $mail_plugins imap_acl
}}
plugin {{
  acl = vfile:{mail}/acl
  acl_globals_only = yes
}}
# the users file itself: Dovecot reads it again when it changes
passdb {{
  driver = passwd-file
  args = {users_file}
}}
userdb {{
  driver = passwd-file
  args = {d}/homes
}}
namespace inbox {{
  inbox = yes
  separator = /
}}
{imap_only(port, chroot=reader is not None)}"""
    # only mail the server checked enters a Maildir: no APPEND/COPY (i), no CREATE (k), no admin (a)
    # a person's own (human) role: read and mark; an agent role's: read only
    acl = "".join(f"* user={x.login} {READ_ONLY if x.read_only else RIGHTS}\n" for x in served)
    files = {"dovecot.conf": conf, "homes": "".join(homes), "acl": acl}
    return Setup(
        files, served, skipped, st.st_uid, owner.pw_name, start, stop, reader, cfg.mail_root if reader else None
    )


def _who(owner: str, user: mailuser.MailUser | None, uid: int, gid: int, owner_gid: int) -> str:
    """Which users Dovecot's processes run as: all the owner (rootless), or, for root's project, the
    mail user for mail, Dovecot's own users for logins, root for auth (the logins file is root's)."""
    if user is None:
        return f"""\
# Run by {owner}, who owns the mail; no root.
# rootless: every process runs as the mail's owner
default_login_user = {owner}
default_internal_user = {owner}
default_internal_group = {_group(owner_gid)}"""
    login = "dovenull" if mailuser.find("dovenull") else user.name
    internal = "dovecot" if mailuser.find("dovecot") else user.name
    return f"""\
# Run by root; the mail is read as {user.name} (uid {uid}), who owns the served Maildirs.
default_login_user = {login}
default_internal_user = {internal}
service auth {{
  user = root
}}"""


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        raise WorkflowError(f"the mail root's group {gid} has no name here") from None


def write(setup: Setup, directory: Path) -> None:
    """Write the files and the directories Dovecot needs, all the owner's only. Each file is
    replaced whole (a running Dovecot never reads half of one). For root's project, hand the mail
    user what Dovecot's mail processes touch (``ops.mailuser``)."""
    user = setup.mail_user
    if user is None and os.geteuid() != setup.uid:
        raise WorkflowError(
            f"the mail root belongs to {setup.owner}, who runs this Dovecot: run the command as "
            f"{setup.owner} (sudo -u {setup.owner} workflow imap --write DIR)"
        )
    directory = directory.expanduser()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    mail = mailuser.folder(directory) if user else directory
    (directory / "state").mkdir(exist_ok=True, mode=0o700)
    if user:
        mailuser.VAR.mkdir(parents=True, exist_ok=True)
        os.chmod(mailuser.VAR, 0o755)  # root's; each configuration's folder in it is closed (0750)
        mail.mkdir(exist_ok=True, mode=0o750)
        os.chown(mail, 0, user.gid)  # root's; its group (the mail user) may enter it, nobody else
        os.chmod(mail, 0o750)
    for sub in ("index", "folders"):
        (mail / sub).mkdir(exist_ok=True, mode=0o700)
        if user:
            mailuser.hand_over(mail / sub, user)
    (mail / "run").mkdir(exist_ok=True)
    os.chmod(mail / "run", 0o755)  # as Dovecot wants its base_dir; DIR (0700) keeps others out
    for name, text in setup.files.items():
        _replace(mail if user and name == "acl" else directory, name, text, user)
    for s in setup.served:
        for sub in ("", "new", "cur", "tmp"):
            (s.maildir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    if user and setup.mail_root is not None:
        mailuser.hand_over(setup.mail_root, user, whole=False)
        for s in setup.served:
            mailuser.hand_over(s.maildir, user)
        mailuser.let_pass(setup.mail_root.parent, user)


def _replace(directory: Path, name: str, text: str, user: mailuser.MailUser | None) -> None:
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if user and name == "acl":
            os.fchown(f.fileno(), 0, user.gid)  # the mail processes read it; only root writes it
            os.fchmod(f.fileno(), 0o640)
        f.write(text)
    os.replace(tmp, directory / name)
