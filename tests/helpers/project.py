"""Project: a scratch workflow project with real Maildirs, and a runner for the real CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers.tiers import spawning
from workflow.app import App
from workflow.bridges.sections import SECTIONS
from workflow.core.config import load_config
from workflow.core.errors import RosterError
from workflow.delivery.credentials import hash_password
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.policy.roster import Roster

ROOT = Path(__file__).resolve().parents[2]  # the checkout

PROJECT_TOML = """\
[workflow]
domain = "workflow.local"
mail_root = "mail"
backend = "scripted"

[smtp]
host = "127.0.0.1"
port = {port}

[panels.spec-writer-panel]
members = ["claude", "gpt-5", "gemini"]
primary = "claude"

[panels.spec-reviewer-panel]
members = ["claude", "gpt-5", "gemini"]
"""


def free_port() -> int:
    """A loopback port nothing listens on (so transport 'auto' falls back to direct delivery)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


@dataclass
class Project:
    dir: Path
    app: App

    @property
    def mail(self) -> Path:
        return self.app.config.mail_root

    def new_files(self, mailbox: str | None = None) -> list[Path]:
        boxes = (
            [self.mail / mailbox]
            if mailbox
            else [p for p in self.mail.iterdir() if p.is_dir() and not p.name.startswith(".")]
            if self.mail.exists()
            else []
        )
        out: list[Path] = []
        for b in boxes:
            for sub in ("new", "cur"):
                d = b / sub
                if d.is_dir():
                    out.extend(sorted(d.iterdir()))
        return out

    def send(self, sender: str, event: str, artifact: str, to: str, reply: str | None = None, **variables: str) -> str:
        req = NotifyRequest(event, (artifact,), tuple(to.split(",")), sender, reply, dict(variables))
        c = self.app.compose(req)
        c.send(make_transport(self.app.config, self.app.deliverer, "direct"))
        return c.message_id

    @spawning
    def run(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None, tool: str = "workflow"
    ) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
        full_env.update(env or {})
        if tool == "workflow":
            cmd = [sys.executable, "-m", "workflow", *args]
        elif tool == "workflow-notify":
            cmd = [sys.executable, "-c", "from workflow.cli.entry import notify; notify()", *args]
        else:
            cmd = [tool, *args]
        return subprocess.run(cmd, cwd=self.dir, env=full_env, input=input, capture_output=True, text=True, timeout=60)


TESTER = "tester"  # a person's login in every test project, which may send as any identity
TESTER_PASSWORD = "tester-password"


def make_project(base: Path, extra_toml: str = "") -> Project:
    """A project whose ``[smtp] auth_users_file`` has the ``TESTER`` login: a person's login, over
    TCP, as tests of the server log in (the owner's login is on the server's socket only)."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "workflow.toml").write_text(PROJECT_TOML.format(port=free_port()) + extra_toml)
    for state in ("proposed", "todo", "doing", "blocked", "done"):
        (base / "specs" / state).mkdir(parents=True, exist_ok=True)
    (base / "specs" / "proposed" / "user-auth.md").write_text("# User auth\n")
    roster = App(load_config(base / "workflow.toml", env={}, plugins=SECTIONS)).roster
    names = sorted(n for n in {*roster.roles, *roster.members, *roster.panels} if _may_send(roster, n))
    secret = hash_password(TESTER_PASSWORD, "testsalt", 1)  # one round: tests log in thousands of times
    users = base / "tester-users"
    users.write_text(f"{TESTER}:{secret}:{','.join(names)}\n")
    return with_smtp(
        Project(base, App(load_config(base / "workflow.toml", env={}, plugins=SECTIONS))),
        f'auth_users_file = "{users}"\n',
    )


def _may_send(roster: Roster, name: str) -> bool:
    try:
        roster.sender(f"{name}@workflow.local")
    except RosterError:
        return False
    return True


def with_smtp(p: Project, settings: str) -> Project:
    """The project again, after adding lines (``auth = "off"\n``…) to its [smtp] table (an
    ``auth_users_file`` in them takes the tester's place)."""
    toml = (p.dir / "workflow.toml").read_text()
    if "auth_users_file" in settings:
        toml = "\n".join(line for line in toml.split("\n") if not line.startswith("auth_users_file ="))
    toml = toml.replace("[smtp]\n", "[smtp]\n" + settings)
    (p.dir / "workflow.toml").write_text(toml)
    return Project(p.dir, App(load_config(p.dir / "workflow.toml", env={}, plugins=SECTIONS)))


def users_project(base: Path, users: str) -> Project:
    """A project whose [smtp] auth_users_file holds ``users`` (login:SECRET:roles lines)."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "users").write_text(users)
    return with_smtp(make_project(base / "p"), f'auth_users_file = "{base / "users"}"\n')


class Home(Project):
    """A project whose commands run with a test's own home directory (its own ~/.maildir and
    ~/.config/workflow); ``home`` is set by the test that makes it."""

    home: Path = Path()

    @spawning
    def run(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None, tool: str = "workflow"
    ) -> subprocess.CompletedProcess[str]:
        from helpers.git import GIT_ENV  # helpers.git imports this module: a top-level import would be a cycle

        return super().run(*args, env={"HOME": str(self.home), **GIT_ENV, **(env or {})}, input=input, tool=tool)
