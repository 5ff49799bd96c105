"""docs/team.md, run as pasted, by a non-root owner and by root: `workflow init` taking the team,
`workflow users add`, `workflow up --web`, the first request, and bob's mailbox pulled over IMAP
from the real Dovecot `workflow imap` configures (as root: Dovecot never reads mail as root, so
`workflow imap` makes a system user for it and hands it the served Maildirs, with no second venv);
each project its own cockpit port."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.agentd import wait_until
from helpers.docs import blocks, run
from helpers.dovecot import available
from helpers.git import GIT_ENV
from helpers.owner import RUNUSER, Owner, owner, unavailable

PAGE = Path(__file__).resolve().parents[2] / "docs" / "team.md"
missing = [c for c in ("mbsync", "git", "doveadm") if shutil.which(c) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (scripts/system-packages installs them)"),
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
]


def _listening(port: int) -> bool:
    with socket.socket() as c:
        return c.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as c:
        c.bind(("127.0.0.1", 0))
        return int(c.getsockname()[1])


@dataclass
class Root:
    """root, as the owner: its own venv's `workflow` (the checkout's), a home of its own."""

    home: Path

    def env(self) -> dict[str, str]:
        path = f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        return {"HOME": str(self.home), "USER": "root", "LOGNAME": "root", "PATH": path, "LANG": "C.UTF-8"}

    def popen(self, line: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["sh", "-c", f"exec {line}"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def stop(self, proc: subprocess.Popen[str]) -> str:
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=20)[0]

    def own(self, *paths: Path) -> None:
        pass

    @property
    def runner(self) -> list[str]:
        return []


@pytest.fixture(params=["owner", "root"])
def alice(request: pytest.FixtureRequest) -> Iterator[tuple[Owner | Root, Path]]:
    base = Path(tempfile.mkdtemp(prefix="team-"))  # pytest's tmp dirs are 0700: the owner could not enter
    try:
        if request.param == "root":
            home = base / "home"
            project = home / "proj"
            project.mkdir(parents=True)
            yield Root(home), project
            return
        os.chmod(base, 0o755)
        with owner(base) as o:
            project = o.home / "proj"
            project.mkdir(parents=True)
            o.own(project)
            yield o, project
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_team_page_runs_as_pasted_and_bob_reads_the_request_over_imap(alice: tuple[Owner | Root, Path]) -> None:
    o, project = alice
    # Claude Code as the page asks it installed, on the owner's PATH: `workflow up` asks it only its
    # --version (no agent role gets mail on this page: the request goes to bob), and refuses without it
    bin_dir = o.home / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "claude").write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    (bin_dir / "claude").chmod(0o755)
    o.own(bin_dir)
    env = {**o.env(), **GIT_ENV, "ANTHROPIC_API_KEY": "sk-test"}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    sections = blocks(PAGE)
    if _listening(1143):  # a Dovecot of someone's own holds the page's port: use another
        other = str(_free_port())
        sections = {t: [x.replace("1143", other) for x in ls] for t, ls in sections.items()}

    def sh(*lines: str) -> list[str]:
        user = o.runner if isinstance(o, Root) else [RUNUSER, "-u", o.name, "--"]
        return run(list(lines), project, env, user=user)

    said = sh("git init -q", *sections["The project and its team"])
    assert "next:" in said[-1] and "workflow users add bob --role spec-reviewer" in said[-1], said[-1]
    assert "workflow up --web" in said[-1] and "workflow notify" in said[-1]
    toml = tomllib.loads((project / "workflow.toml").read_text())
    assert toml["workflow"]["backend"] == "claude-code"
    assert toml["web"]["port"] not in (8026, toml["smtp"]["port"])  # the project's own cockpit port
    assert 'mode = "human"' in (project / "roles" / "spec-reviewer.md").read_text()

    added = sh(*sections["Bob's login"])
    assert "bob-s3cret" not in "".join(added)
    users = (o.home / ".config" / "workflow" / "users").read_text()
    assert users.startswith("bob:{PBKDF2}$") and users.rstrip().endswith(":spec-reviewer"), users
    assert oct((o.home / ".config" / "workflow" / "users").stat().st_mode & 0o777) == "0o600"
    assert sh("workflow trust")[0].startswith("approved 0 change(s)")  # users add approved what it changed

    [start] = sections["Start the team"]
    up = o.popen(start, project, env)
    dovecot = False
    try:
        mail = o.home / ".maildir" / "workflow"
        wait_until(
            lambda: _listening(toml["smtp"]["port"]) and _listening(toml["web"]["port"]),
            "workflow up --web",
            timeout=30,
        )
        sh(*sections["The first request"])
        sh(*sections["Bob's mail client, through IMAP"][:2])
        dovecot = True
        said = sh(*sections["Bob's mail client, through IMAP"][2:])
        pulled = list((o.home / "Mail" / "workflow-bob" / "INBOX").glob("*/*"))
        assert any(
            b"X-Event-Type: review-request" in f.read_bytes() and b"csv-export" in f.read_bytes() for f in pulled
        )
        assert "Incoming (IMAP):      127.0.0.1  port " in said[-1], said[-1]
        link = sh(*sections["The cockpit"])[0]
        assert f":{toml['web']['port']}/" in link, link
        assert (mail / "spec-reviewer").is_dir()
        if isinstance(o, Root):  # Dovecot read bob's mail as the user `workflow imap` made for it
            assert (mail / "spec-reviewer").stat().st_uid == pwd.getpwnam("workflow-mail").pw_uid
    finally:
        if dovecot:
            sh(*sections["Stop"])
        print(o.stop(up))
