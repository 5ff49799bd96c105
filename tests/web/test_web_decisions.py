"""A decision clicked in the cockpit survives a crash: `workflow web` killed (SIGKILL) between the click
and the move — held there by the project's git lock, or by a server that does not answer yet — and
the move still happens exactly once, its mail delivered once, by agentd or by the next cockpit."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from helpers.agentd import Daemon, wait_until
from helpers.git import sh
from helpers.project import Project
from helpers.smtp import children, server_process
from helpers.web import BOB, BOB_PASSWORD, Client, Server, owner_link, web_server
from workflow.mail.message import parse


def _quiet_agentd(p: Project) -> None:
    """agentd runs no role here (only the people's decisions), committed as a user's config is."""
    with open(p.dir / "workflow.toml", "a") as f:
        f.write('\n[agentd]\nroles = ["vision-writer"]\nrescan = 0.5\n')
    sh(p, "git", "commit", "-qam", "agentd decides, runs nobody")


@contextmanager
def _git_lock(p: Project) -> Iterator[None]:
    """The project's git lock, held as a long git write of the owner's holds it."""
    path = p.app.config.state.git_lock
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _opened(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (it waits for its flock, in this test)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def _backlog(socket_path: Path) -> int:
    """Connections waiting to be accepted on a listening Unix socket (ss's Recv-Q of a listener)."""
    out = subprocess.run(["ss", "-xlH"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[4] == str(socket_path):
            return int(cols[2])
    return 0


def _click(server: Server, request: str) -> tuple[Client, Future[tuple[int, str]], ThreadPoolExecutor]:
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    form = {"csrf": bob.csrf(), "id": request, "verdict": "approve", "reason": "complete", "back": "/board"}
    pool = ThreadPoolExecutor(1)
    return bob, pool.submit(bob.post, "/act/decide", form), pool


def _kill(server: Server) -> None:
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)


def _moves(p: Project) -> list[str]:
    log = sh(p, "git", "log", "--format=%s", "--", "specs/proposed/user-auth.md", "specs/todo/user-auth.md").stdout
    return [line for line in log.splitlines() if "proposed → todo" in line]


def _approvals(p: Project) -> list[str]:
    out = []
    for f in p.new_files("spec-writer"):
        m = parse(f.read_bytes())
        if m.event == "approval":
            out.append(m.message_id or "")
    return out


def _moved(p: Project) -> Callable[[], bool]:
    return lambda: (p.dir / "specs/todo/user-auth.md").exists() and bool(_moves(p))


def test_killed_while_the_move_waits_for_git_agentd_makes_the_move_once(project: Project) -> None:
    _quiet_agentd(project)
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    daemon = Daemon(project)
    try:
        with web_server(project) as server:
            with _git_lock(project):
                _, posted, pool = _click(server, request)
                wait_until(lambda: _opened(server.proc.pid, project.app.config.state.git_lock), "the move to wait")
                _kill(server)
            pool.shutdown()
            assert posted.exception() is not None  # the browser's request died with the cockpit
        daemon.wait_for(_moved(project), "agentd to finish the cockpit's decision", timeout=20)
        daemon.wait_for(lambda: daemon.idle(), "agentd to be idle")
    finally:
        daemon.stop()
    assert len(_moves(project)) == 1, sh(project, "git", "log", "--stat").stdout
    assert sh(project, "git", "log", "-1", "--format=%an").stdout.strip() == "spec-reviewer"
    assert len(_approvals(project)) == 1, _approvals(project)
    assert (project.dir / "specs/todo/user-auth.md").exists() and not (
        project.dir / "specs/proposed/user-auth.md"
    ).exists()


def test_killed_before_its_mail_was_delivered_the_next_cockpit_sends_it_and_moves_once(project: Project) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    socket_path = project.app.config.state.socket
    with server_process(project.dir, "--workers", "1") as (smtpd, _port):
        wait_until(socket_path.exists, "the server's socket")
        with web_server(project) as server:
            stopped = [smtpd.pid, *children(smtpd.pid)]
            for pid in stopped:  # it accepts no connection until it goes on
                os.kill(pid, signal.SIGSTOP)
            try:
                _, posted, pool = _click(server, request)
                wait_until(lambda: _backlog(socket_path) > 0, "the cockpit to connect to the server")
                _kill(server)
            finally:
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
            pool.shutdown()
            assert posted.exception() is not None
        assert _approvals(project) == [] and not _moves(project)  # nothing happened yet
        with web_server(project):
            wait_until(_moved(project), "the next cockpit to finish the decision", timeout=20)
            wait_until(lambda: len(_approvals(project)) > 0, "its mail")
    assert len(_moves(project)) == 1, sh(project, "git", "log", "--stat").stdout
    assert len(_approvals(project)) == 1, _approvals(project)


def test_an_agent_roles_decision_killed_at_its_move_is_moved_then_notified_once(project: Project) -> None:
    """The owner deciding as an agent role: the move first, then its notification (as `workflow move
    --notify`); killed at the move, agentd makes it and sends the notification, once, after it."""
    _quiet_agentd(project)
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "test-reviewer")
    daemon = Daemon(project)
    try:
        with web_server(project) as server:
            owner = Client(server.url)
            assert owner.follow(owner_link(project)) == 303
            csrf = owner.csrf()
            assert owner.post("/role", {"csrf": csrf, "role": "test-reviewer", "back": "/board"})[0] == 303
            form = {"csrf": csrf, "id": request, "verdict": "approve", "reason": "fine", "back": "/board"}
            with _git_lock(project), ThreadPoolExecutor(1) as pool:
                posted = pool.submit(owner.post, "/act/decide", form)
                wait_until(lambda: _opened(server.proc.pid, project.app.config.state.git_lock), "the move to wait")
                assert _approvals(project) == []  # an agent role's notification follows its move
                _kill(server)
            assert posted.exception() is not None
        daemon.wait_for(lambda: bool(_approvals(project)), "agentd to move and notify", timeout=20)
        daemon.wait_for(lambda: daemon.idle(), "agentd to be idle")
    finally:
        daemon.stop()
    assert len(_moves(project)) == 1 and len(_approvals(project)) == 1
    [approval] = [
        parse(f.read_bytes()) for f in project.new_files("spec-writer") if b"X-Event-Type: approval" in f.read_bytes()
    ]
    assert approval.sender == "test-reviewer@workflow.local" and approval.artifacts == ["specs/todo/user-auth.md"]
    assert approval.in_reply_to == request
