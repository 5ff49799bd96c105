"""Users: ``workflow users add`` — a person joins the team in one command.

Adding a login does what the steps by hand did: the password is hashed (Dovecot's ``{PBKDF2}``,
``credentials.hash_password``) and the line ``login:SECRET:role`` appended to ``[smtp]
auth_users_file`` (``~/.config/workflow/users``, mode 0600, when the project names none: the
line naming it is added under ``[smtp]``); the role becomes a person's (``make_human``: the
project's ``roles/ROLE.md``, copied from the built-in role when there is none, with ``mode =
"human"``), so no agent answers in the person's place; and the control files this changed are
approved (``trust.approve``), as ``workflow trust`` would after reading them. The servers read the
users file again when it changes: no restart.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from workflow.artifacts import trust
from workflow.core.config import CONFIG_NAME, Config
from workflow.core.errors import WorkflowError
from workflow.delivery.credentials import LOGIN_RE, PEER, hash_password, load_users
from workflow.ops.rolefile import with_key

DEFAULT_USERS = "~/.config/workflow/users"


def make_human(config: Config, role: str, description: str = "") -> Path | None:
    """Make ``role`` a person's: its ``roles/`` file says ``mode = "human"`` (copied from the
    built-in role when the project has none). Returns the file written, None when it already was."""
    return with_key(config, role, "mode", "human", description)


def _toml(config: Config) -> Path:
    return config.path or config.project_dir / CONFIG_NAME


def users_file(config: Config) -> tuple[Path, bool]:
    """The project's users file, and whether ``workflow.toml`` had to be told of it (the default's
    line added under ``[smtp]``)."""
    if config.smtp.auth_users_file:
        return Path(config.smtp.auth_users_file).expanduser(), False
    toml = _toml(config)
    text = toml.read_text(encoding="utf-8")
    line = f'auth_users_file = "{DEFAULT_USERS}"   # people\'s logins (`workflow users add`)'
    if re.search(r"^\[smtp\]\s*$", text, re.M):
        text = re.sub(r"^\[smtp\]\s*$", "[smtp]\n" + line, text, count=1, flags=re.M)
    else:
        text = text.rstrip("\n") + "\n\n[smtp]\n" + line + "\n"
    toml.write_text(text, encoding="utf-8")
    return Path(DEFAULT_USERS).expanduser(), True


def add(config: Config, login: str, role: str, password: str) -> list[str]:
    """Add ``login`` as a person taking ``role``; return what was done, a line each."""
    if not LOGIN_RE.match(login):
        raise WorkflowError(f"{login!r} is not a login (letters, digits, . _ @ + -)")
    if len(password) < 8:
        raise WorkflowError("the password is shorter than 8 characters: choose a longer one")
    if "\n" in password or "\r" in password:
        raise WorkflowError("the password has a line break: give it on one line")
    done, path = _add_login(
        config, login, password, role, "to change its password or role, remove its line and add it again"
    )
    told = bool(done)  # the users file was named in workflow.toml just now
    done.append(f"added login {login} (sends and reads as {role}) to {path}")
    made = make_human(config, role, f"{login} takes {role} from a mail client or the cockpit.")
    if made:
        done.append(f"made {role} a person's role in {made} (mode = \"human\": no agent answers in {login}'s place)")
    changed = [
        p.relative_to(config.project_dir).as_posix()
        for p in ([_toml(config)] if told else []) + ([made] if made else [])
    ]
    if changed and trust.approve(config, changed):  # only what this wrote: another change stays for you to read
        done.append(f"approved {', '.join(changed)} as changed here (as `workflow trust` does)")
    return done


def add_peer(config: Config, host: str) -> tuple[list[str], str]:
    """Add the login another host's Postfix relays its roles' mail here with (``peer-HOST``,
    roles ``@HOST``); what was done, a line each, and the secret — shown once, kept only hashed."""
    if not config.hosts:
        raise WorkflowError(f"{_toml(config)} lists no [hosts.NAME]: a peer is one of the project's hosts")
    if config.host(host) is None:
        names = ", ".join(h.name for h in config.hosts)
        raise WorkflowError(f"{host!r} is not a host of {_toml(config)}: expected one of {names}")
    if host == config.this_host:
        raise WorkflowError(f"{host} is this host: its own mail needs no peer login")
    return _peer_login(config, host, f"host {host}'s Postfix relays the mail of {host}'s roles with it")


def add_own_relay(config: Config) -> tuple[list[str], str]:
    """Add the login this host's own Postfix hands it bounces with (``peer-THIS``): a null
    sender is taken from it alone (``delivery.relay.not_bounce``)."""
    return _peer_login(config, config.this_host, "this host's own Postfix hands it bounces with it")


def _peer_login(config: Config, host: str, what: str) -> tuple[list[str], str]:
    login, secret = f"peer-{host}", secrets.token_urlsafe(24)
    done, path = _add_login(config, login, secret, PEER + host, "to give it a new secret, remove its line first")
    done.append(f"added login {login} to {path}: {what}")
    return done, secret


def _add_login(config: Config, login: str, password: str, roles: str, again: str) -> tuple[list[str], Path]:
    """Append ``login:HASH:roles`` to the users file (named in workflow.toml first if it was not);
    what was done, and the file. A login already there is refused, saying how to change it."""
    done: list[str] = []
    path, told = users_file(config)
    if told:
        done.append(f"set [smtp] auth_users_file = {DEFAULT_USERS} in {_toml(config)}")
    if path.exists() and path.stat().st_size and login in load_users(str(path)):
        raise WorkflowError(f"{path}: login {login} is there already; {again}")
    append_private(path, f"{login}:{hash_password(password)}:{roles}\n")
    return done, path


def append_private(path: Path, line: str) -> None:
    """Append ``line`` to a file of the owner's alone (0600, in a 0700 directory)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
