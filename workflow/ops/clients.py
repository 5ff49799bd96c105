"""Clients: working configurations of people's mail clients for this project (``workflow client``).

Each client is a small object (``name``, ``about``, ``render``) in the ``CLIENTS`` table, and each
configuration is made from the project itself — its mail root, domain, roles, SMTP port and a
login of ``[smtp] auth_users_file`` — so the lines a person pastes are right for their project.
What every configuration holds to, and why:

- **Nothing written around the server.** Mail is sent through ``workflow smtpd`` with the
  person's login, never saved into the mail root (no Sent copy, no postponed folder there), and an
  IMAP client only pulls.
- **Agents' copies stay theirs.** Reading a copy in one role's mailbox must not mark another
  role's copy read (a run would never see it): notmuch does not sync flags to files, and mutt opens
  every mailbox but the person's own role read-only.
- **The workflow headers are visible and searchable** (``X-Event-Type``, ``X-Workflow-State``,
  ``X-Artifacts``), and loopback needs no TLS (``ssl_starttls``/``tls off``); another host needs
  the server's TLS.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple, Protocol

from workflow.app import App
from workflow.core.errors import ConfigError
from workflow.delivery.credentials import load_users, root_id

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Setting(NamedTuple):
    """What a configuration is made from."""

    mail_root: Path
    domain: str
    roles: tuple[str, ...]  # every role mailbox
    login: str
    role: str  # the login's (first) role: the person's own mailbox and From
    smtp_host: str
    smtp_port: int
    imap_port: int
    password_file: str  # as the configuration names it (~ kept: the client expands it)
    human: bool  # the login's role is a person's (mode = "human"): its own mailbox is theirs to mark
    database: Path  # notmuch's database, outside the mail root

    @property
    def address(self) -> str:
        return f"{self.role}@{self.domain}"

    @property
    def tls(self) -> bool:
        return self.smtp_host not in LOOPBACK


def setting(app: App, login: str, imap_port: int = 1143, password_file: str | None = None) -> Setting:
    """The project's values for ``login``; refused, naming the fix, when the login is unknown."""
    cfg = app.config
    if not cfg.smtp.auth_users_file:
        raise ConfigError(
            f"[smtp] auth_users_file is not set in {cfg.file}: add the people's logins first "
            "(login:SECRET:role lines, SECRET from `workflow smtpd --hash-password`)"
        )
    users = load_users(cfg.smtp.auth_users_file)
    if login not in users:
        known = ", ".join(sorted(users)) or "none"
        raise ConfigError(f"{login!r} is not a login of {cfg.smtp.auth_users_file} (logins: {known})")
    role = users[login].roles[0]
    roles = tuple(sorted(app.roster.roles))
    found = app.roster.roles.get(role)
    home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return Setting(
        cfg.mail_root,
        cfg.domain,
        roles,
        login,
        role,
        cfg.smtp.host,
        cfg.smtp.port,
        imap_port,
        password_file or f"~/.config/workflow/{login}.password",
        found is not None and found.mode == "human",
        home / "workflow" / "notmuch" / root_id(cfg.mail_root),
    )


class Client(Protocol):
    name: str
    about: str

    def render(self, s: Setting) -> str: ...


class Notmuch:
    name = "notmuch"
    about = "notmuch on the mail root (the owner's machine): flags never synced onto agents' copies"

    def render(self, s: Setting) -> str:
        s.database.mkdir(parents=True, exist_ok=True, mode=0o700)  # notmuch makes its database, not the folder
        return f"""\
# notmuch for the workflow-mail project at {s.mail_root} (made by `workflow client notmuch`).
# Use: export NOTMUCH_CONFIG=~/.notmuch-config-workflow; notmuch new
[database]
# notmuch's own database lives outside the mail root (which holds only what the server delivered)
path={s.database}
mail_root={s.mail_root}

[user]
name={s.login}
primary_email={s.address}

[new]
tags=unread;inbox;
# .workflow holds the index, queues and run state, never mail; tmp/ holds copies being written
ignore=.workflow;tmp

[maildir]
# false: notmuch never renames a file to change its flags. With true, reading a copy marks every
# copy with that Message-ID read — an agent role's too, and its run would never see the mail.
synchronize_flags=false

[index]
# search the workflow headers: Event:review-request, State:todo, Artifact:user-auth
header.Event=X-Event-Type
header.State=X-Workflow-State
header.Artifact=X-Artifacts
"""


class Mutt:
    name = "mutt"
    about = "mutt or neomutt on the mail root: other roles' mailboxes read-only, sending through smtpd"

    def render(self, s: Setting) -> str:
        own = f"{s.mail_root}/{s.role}/?$"  # not "^…": mutt reads a leading ^ as "the current mailbox"
        # an agent's role: even "its own" mailbox is the agent's, never written back
        hook = f"folder-hook !'{own}' 'push <toggle-write>'" if s.human else "folder-hook . 'push <toggle-write>'"
        whose = f"every mailbox but {s.role}'s" if s.human else f"every mailbox ({s.role} is an agent's role)"
        boxes = " ".join(f"+{r}" for r in s.roles)
        scheme = "smtps" if s.tls else "smtp"
        tls = (
            "set ssl_starttls = yes\nset ssl_force_tls = yes"
            if s.tls
            else "set ssl_starttls = no\nset ssl_force_tls = no"
        )
        return f"""\
# mutt/neomutt for the workflow-mail project at {s.mail_root} (made by `workflow client mutt`).
# Use: mutt -F ~/.muttrc-workflow    (neomutt -F ~/.muttrc-workflow)
set mbox_type = Maildir
set folder = "{s.mail_root}"
set spoolfile = "+{s.role}"
mailboxes {boxes}
# {whose} is never written back ("%" in the status line): reading an
# agent's copy must not mark it read, or that role's run would never see the mail
{hook}
# nothing is saved, copied or edited into a mailbox from here: mail enters only through the server
bind index,pager s noop
bind index,pager C noop
bind index,pager <Esc>s noop
bind index,pager <Esc>C noop
bind index,pager e noop
set move = no
# nothing is saved into the mail root: it holds only what the server delivered
set record = ""
set postponed = "~/.cache/mutt-workflow-postponed"
set header_cache = "~/.cache/mutt-workflow"
set sort = threads
set sort_aux = last-date-received
unignore X-Event-Type X-Workflow-State X-Artifacts X-Next-Roles
hdr_order From To Date Subject X-Event-Type X-Workflow-State X-Artifacts
# edit the headers with the message: add a line such as "X-Event-Type: question" to type it
set edit_headers = yes
# sent as {s.role} through workflow smtpd, logged in as {s.login}
set from = "{s.login} <{s.address}>"
set use_from = yes
set smtp_url = "{scheme}://{s.login}@{s.smtp_host}:{s.smtp_port}/"
set smtp_pass = "`cat {s.password_file}`"
set smtp_authenticators = "plain"
{tls}
"""


class Msmtp:
    name = "msmtp"
    about = "msmtp: send as the login's role through workflow smtpd (AUTH PLAIN)"

    def render(self, s: Setting) -> str:
        tls = "tls on\ntls_starttls on" if s.tls else "tls off"
        return f"""\
# msmtp for the workflow-mail project at {s.mail_root} (made by `workflow client msmtp`).
# Use: msmtp -C ~/.msmtprc-workflow -t < message    (the file must be yours only: chmod 600)
defaults
auth plain
{tls}

account workflow
host {s.smtp_host}
port {s.smtp_port}
from {s.address}
user {s.login}
passwordeval "cat {s.password_file}"

account default : workflow
"""


class Mbsync:
    name = "mbsync"
    about = "mbsync (isync): pull the login's role mailbox over IMAP into a local Maildir, never push"

    def render(self, s: Setting) -> str:
        ssl = "IMAPS" if s.tls else "None"
        local = f"~/Mail/workflow-{s.login}/"
        return f"""\
# mbsync for the workflow-mail project at {s.mail_root} (made by `workflow client mbsync`).
# Use: mkdir -p {local} && mbsync -c ~/.mbsyncrc-workflow -a
IMAPAccount workflow-{s.login}
Host {s.smtp_host}
Port {s.imap_port}
User {s.login}
PassCmd "cat {s.password_file}"
SSLType {ssl}
AuthMechs PLAIN LOGIN

IMAPStore workflow-{s.login}-remote
Account workflow-{s.login}

MaildirStore workflow-{s.login}-local
Path {local}
Inbox {local}INBOX

Channel workflow-{s.login}
Far :workflow-{s.login}-remote:
Near :workflow-{s.login}-local:
Patterns INBOX
# Pull only: the server refuses anything written into a role's mailbox (mail is sent, not stored)
Sync Pull
Create Near
Expunge None
"""


class Thunderbird:
    name = "thunderbird"
    about = "Thunderbird (or any GUI client): the account settings to type in"

    def render(self, s: Setting) -> str:
        security = "STARTTLS" if s.tls else "None (loopback only)"
        return f"""\
Thunderbird account for {s.login} ({s.role} of the workflow-mail project at {s.mail_root})
  Your name:            {s.login}
  Email address:        {s.address}
  Incoming (IMAP):      {s.smtp_host}  port {s.imap_port}  security {security}  authentication: normal password
  Outgoing (SMTP):      {s.smtp_host}  port {s.smtp_port}  security {security}  authentication: normal password
  Username (both):      {s.login}
  Copies & Folders:     untick "Place a copy in" (the server keeps no Sent folder in a role's mailbox)
  Composition:          plain text is best; HTML is accepted and read as text
"""


CLIENTS: tuple[Client, ...] = (Notmuch(), Mutt(), Msmtp(), Mbsync(), Thunderbird())


def client(name: str) -> Client:
    for c in CLIENTS:
        if c.name == name or (name == "neomutt" and c.name == "mutt"):
            return c
    raise ConfigError(f"unknown mail client {name!r}; expected one of {', '.join(c.name for c in CLIENTS)}")
