"""Gmail: a project with the Gmail bridge pointed at a real Dovecot, and the bridge run as a command."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import pytest

from helpers.dovecot import PASSWORD, USER, available
from helpers.git import git_project
from helpers.project import Project
from helpers.tiers import spawning

WHY = available()
needs_dovecot = pytest.mark.skipif(WHY is not None, reason=WHY or "")


class Server(Protocol):
    port: int


@spawning
def bridge_project(
    tmp_path: Path,
    d: Server,
    agent: str = 'enabled = true\nemail = "tasks@todo.example"\n',
    gmail: str = "",
    tail: str = "",
) -> Project:
    """A project whose Gmail bridge reads the IMAP server ``d`` (the Dovecot, the fake Gmail);
    ``gmail`` adds keys to [bridges.gmail], ``tail`` tables. A git repository made by `workflow
    init`, as a user's is: the reply loop's sessions are runs, transactions over it."""
    p = git_project(
        tmp_path / "bp",
        f"""
[bridges.gmail]
imap_host = "127.0.0.1"
imap_port = {d.port}
imap_tls = false
user = "{USER}"
password_env = "TEST_IMAP_PASSWORD"
role = "user"
outbound = true
{gmail}
[bridges.gmail.agents.todo_forwarder]
{agent}
{tail}""",
    )
    return p


def mail_msg(i: int, subject: str, body: str, refs: str = "") -> bytes:
    extra = f"In-Reply-To: {refs.split()[-1]}\r\nReferences: {refs}\r\n" if refs else ""
    return (
        f"From: Alice <alice@example.org>\r\nTo: {USER}\r\nSubject: {subject}\r\nMessage-ID: <m{i}@example.org>\r\n"
        f"Date: Thu, 26 Nov 2026 07:0{i % 10}:00 +0000\r\n{extra}\r\n{body}\r\n"
    ).encode()


@spawning
def run_bridge(p: Project, *args: str, env: dict[str, str] | None = None) -> object:
    return p.run("bridge", "gmail", "--once", *args, env={"TEST_IMAP_PASSWORD": PASSWORD, **(env or {})})


def spool(p: Project) -> list[bytes]:
    box = p.mail / "bridge-outbound"
    return [f.read_bytes() for sub in ("new", "cur") if (box / sub).is_dir() for f in sorted((box / sub).iterdir())]
