"""Owner-only modes: what the owner's processes write under the mail root (Maildirs, the index
with every message's text, the panel store, run logs, the server's state) no other local user
can read; an older install that is not is reported by `workflow doctor` and tightened by
`doctor --fix`."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.git import git_project
from helpers.project import make_project
from helpers.smtp import client, message, server_process
from workflow.delivery.server.smtpd import BackgroundServer


def loose(root: Path) -> list[str]:
    """Every file or folder under ``root`` (itself included) that grants another user anything."""
    out = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
            out.append(f"{path.relative_to(root.parent)} {stat.filemode(st.st_mode)}")
    return out


def as_nobody(*cmd: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["runuser", "-u", "nobody", "--", *cmd], capture_output=True, check=False)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode())


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder every user may enter (pytest's own is its owner's only)."""
    with tempfile.TemporaryDirectory(prefix="workflow-modes-") as d:
        os.chmod(d, 0o755)
        yield Path(d)


def test_nothing_the_owners_processes_write_can_be_read_by_another_user(open_tmp: Path) -> None:
    project = make_project(open_tmp / "proj")
    project.dir.chmod(0o755)
    mail = project.app.config.mail_root
    assert not mail.exists()  # made by the commands below, as people run them
    r = project.run("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify")
    assert r.returncode == 0, r.stderr  # no server: delivered directly (Maildir, index)
    with server_process(project.dir) as (_, port):  # the server's state, its log, a delivery through it
        toml = project.dir / "workflow.toml"
        toml.write_text(toml.read_text().replace(f"port = {project.app.config.smtp.port}", f"port = {port}"))
        r = project.run("status-update", "specs/proposed/user-auth.md", "spec-writer", tool="workflow-notify")
        assert r.returncode == 0, r.stderr
    assert project.run("search", "Why").returncode == 0  # the full-text rows
    assert project.run("reindex").returncode == 0
    assert len(project.new_files()) == 2
    assert loose(mail) == []
    index = project.app.config.index_path
    if os.geteuid() == 0 and shutil.which("runuser"):  # another local user tries: nothing to read
        r = as_nobody("cat", str(index))
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
        r = as_nobody("ls", str(mail / "spec-reviewer" / "new"))
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr


def test_doctor_reports_an_install_others_can_read_and_fix_makes_it_the_owners(tmp_path: Path) -> None:
    project = git_project(tmp_path / "proj")
    r = project.run("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify")
    assert r.returncode == 0, r.stderr
    mail = project.app.config.mail_root
    index = project.app.config.index_path
    mail.chmod(0o755)  # as an older version left them
    index.chmod(0o644)
    (mail / ".workflow").chmod(0o755)
    r = project.run("doctor")
    assert r.returncode != 0
    assert "modes: 2 file(s) or folder(s) under the mail root can be read by other users" in r.stdout, r.stdout
    assert stat.S_IMODE(index.stat().st_mode) == 0o600  # every store is made the owner's as it is opened
    r = project.run("doctor", "--fix")
    assert "fixed modes: made 2 file(s) or folder(s) the owner's only" in r.stdout, r.stdout
    assert loose(mail) == []
    assert "modes:" not in project.run("doctor").stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root to act as another user")
def test_a_loose_mail_root_is_readable_by_others_before_the_fix(open_tmp: Path) -> None:
    """The reproduction: with the modes an older install left, another user reads the index."""
    project = git_project(open_tmp / "proj")
    project.run("question", "specs/proposed/user-auth.md", "spec-reviewer", "QUESTION=Why?", tool="workflow-notify")
    mail, index = project.app.config.mail_root, project.app.config.index_path
    for d in (project.dir, mail, mail / ".workflow"):
        d.chmod(0o755)
    index.chmod(0o644)
    assert as_nobody("cat", str(index)).returncode == 0
    project.run("doctor", "--fix")
    assert as_nobody("cat", str(index)).returncode != 0


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The umask a process started some other way may have (a service manager, a library user)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_the_mail_root_is_the_owners_only_whatever_the_umask(open_tmp: Path, loose_umask: None) -> None:
    """The reproduction: made by a process with umask 022, the index was 0644 in a 0755 folder."""
    project = make_project(open_tmp / "proj")
    project.dir.chmod(0o755)
    config = project.app.config
    with BackgroundServer(config, project.app.deliverer) as port, client(port) as s:
        s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], message())
        with project.app.index() as index:
            index.refresh()
            assert index.search("Hello")
        index = config.index_path
        made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in index.parent.glob(index.name + "*")}
        assert made == {index.name: 0o600, f"{index.name}-wal": 0o600, f"{index.name}-shm": 0o600}, made
    assert loose(config.mail_root) == []
    if os.geteuid() == 0 and shutil.which("runuser"):
        r = as_nobody("cat", str(index))
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr


def test_the_server_and_init_make_an_older_loose_mail_root_the_owners(tmp_path: Path) -> None:
    project = git_project(tmp_path / "proj")
    project.send("spec-writer", "question", "specs/proposed/user-auth.md", "spec-reviewer", QUESTION="Why?")
    config = project.app.config
    mail, state = config.mail_root, config.state.root
    for loosened in (mail, state, config.index_path, state / "locks"):
        loosened.mkdir(exist_ok=True) if loosened.suffix != ".sqlite" else None
        loosened.chmod(0o755 if loosened.is_dir() else 0o644)
    with BackgroundServer(config, project.app.deliverer):
        assert loose(mail) == []
    for loosened in (mail, state, config.index_path):
        loosened.chmod(0o755 if loosened.is_dir() else 0o644)
    r = project.run("init")
    assert r.returncode == 0, r.stderr
    assert loose(mail) == []
