"""One suite, both paths: workflow-notify over SMTP and by direct delivery give the same result."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.project import Project
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import SmtpTransport
from workflow.mail.message import parse

CASES = [
    (["review-request", "specs/proposed/user-auth.md", "spec-reviewer", "CONTEXT=look"], None),
    (
        [
            "--from",
            "spec-reviewer",
            "approval",
            "specs/todo/login.md",
            "spec-writer",
            "NEXT_STATE=todo",
            "NEXT_ROLES=skeleton-writer,test-writer",
        ],
        None,
    ),
    (
        [
            "--from",
            "spec-reviewer-panel.claude",
            "question",
            "specs/*/user-auth.md",
            "spec-reviewer-panel-internal",
            "QUESTION=q",
        ],
        None,
    ),
    (
        ["--from", "spec-writer", "question", "specs/*/user-auth.md", "spec-reviewer-panel-internal", "QUESTION=q"],
        "internal-members-only",
    ),
    (["--from", "spec-writer", "approval", "specs/proposed/user-auth.md", "spec-reviewer"], "reviewer-decisions"),
    (["question", "specs/*/user-auth.md", "nobody@example.com", "QUESTION=q"], "relaying denied"),
    (["question", "specs/*/user-auth.md", "spec-reveiwer", "QUESTION=q"], "did you mean spec-reviewer@workflow.local"),
]


def run_case(p: Project, via: str, args: list[str]) -> tuple[int, str, list[tuple[str, tuple[tuple[str, str], ...]]]]:
    if via == "smtp":
        with BackgroundServer(p.app.config, p.app.deliverer, port=p.app.config.smtp.port):
            r = p.run("--via", via, *args, tool="workflow-notify")
    else:
        r = p.run("--via", via, *args, tool="workflow-notify")
    return r.returncode, r.stderr, outcome(p)


def outcome(p: Project) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    out = []
    for f in p.new_files():
        headers = tuple((n, v) for n, v in parse(f.read_bytes()).headers if n not in ("Message-ID", "Date"))
        out.append((f.parent.parent.name, headers))
    return sorted(out)


@pytest.mark.parametrize(("args", "refusal"), CASES)
def test_same_result_both_ways(project_factory: Callable[..., Project], args: list[str], refusal: str | None) -> None:
    def made() -> Project:
        p = project_factory()
        (p.dir / "specs" / "todo" / "login.md").write_text("# login\n")  # workflow-notify refuses a missing one
        return p

    results = {via: run_case(made(), via, args) for via in ("smtp", "direct")}
    for via, (code, err, stored) in results.items():
        if refusal:
            assert code != 0 and refusal in err, (via, err)
            assert stored == []
        else:
            assert code == 0 and f"({via}:" in err, (via, err)
            assert stored
    assert results["smtp"][2] == results["direct"][2]


def test_auto_prefers_the_server_and_falls_back(project: Project) -> None:
    r = project.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify")
    port = project.app.config.smtp.port
    assert r.returncode == 0 and "(no server running; delivered directly: spec-reviewer)" in r.stderr, r.stderr
    with BackgroundServer(project.app.config, project.app.deliverer, port=port):
        r = project.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify")
    assert r.returncode == 0 and f"(smtp: {project.app.config.state.socket})" in r.stderr, r.stderr
    r = project.run(
        "--via", "smtp", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify"
    )
    assert r.returncode != 0 and "cannot reach the SMTP server's socket" in r.stderr
    assert "no server runs for this mail root: start `workflow smtpd`" in r.stderr


def _late_server(ready: threading.Event, path: str) -> None:
    """An SMTP peer whose reply to the end of DATA comes late (a busy server)."""
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(path)
        srv.listen(1)
        ready.set()
        conn, _ = srv.accept()
        with conn, conn.makefile("rb") as f, contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(b"220 late ESMTP\r\n")
            in_data = False
            for line in f:
                if in_data:
                    if line == b".\r\n":
                        in_data = False
                        time.sleep(0.6)
                        conn.sendall(b"250 2.0.0 queued\r\n")
                    continue
                verb = line[:4].upper()
                if verb in (b"EHLO", b"HELO"):
                    conn.sendall(b"250 late\r\n")
                elif verb == b"DATA":
                    in_data = True
                    conn.sendall(b"354 go ahead\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 2.1.0 OK\r\n")


def test_an_interrupt_during_a_send_is_not_mistaken_for_a_refusal(tmp_path: Path) -> None:
    # A run-role stopped (SIGTERM) while it sends: the interrupt must end it, not turn into
    # "SMTP server refused the message: 250" (smtplib's QUIT on the way out read the late reply).
    ready, path = threading.Event(), str(tmp_path / "late.sock")
    t = threading.Thread(target=_late_server, args=(ready, path), daemon=True)
    t.start()
    ready.wait(5)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            SmtpTransport(path, 5).send(b"Subject: x\r\n\r\nbody\r\n", "a@b.c", ["d@e.f"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    t.join(5)


def test_a_direct_delivery_cut_off_before_indexing_is_not_stored_twice_on_retry(project: Project) -> None:
    """A process killed after storing a copy but before indexing it (the Slack bridge's SIGKILL
    test hit that window): the retry of the same bytes finds the copy on disk and stores nothing."""
    from workflow.mail.message import Draft, build

    raw = build(
        Draft(
            sender="user@workflow.local",
            to=["coordinator@workflow.local"],
            subject="question",
            body="once\n",
            message_id="<cut-off-1@workflow.local>",
        )
    )
    first = raw.replace(b"cut-off-1@", b"cut-off-0@")
    project.app.deliverer.deliver(first, ["coordinator@workflow.local"])  # the index exists and is current
    project.app.maildirs.deliver(["coordinator"], raw)  # stored, never indexed
    again = project.app.deliverer.deliver(raw, ["coordinator@workflow.local"])
    assert again.already == ("coordinator",) and again.mailboxes == ()
    assert len(list(project.new_files("coordinator"))) == 2


def test_a_server_on_another_port_is_found_and_a_port_in_use_is_one_line(project: Project) -> None:
    """`workflow smtpd --port N` with [smtp] port = M: the other commands find N (the server
    records it); a port someone holds is refused in one line naming the holder; ports are checked."""
    import socket as sock_mod

    from helpers.smtp import server_process

    with server_process(project.dir) as (proc, port):
        assert port != project.app.config.smtp.port
        r = project.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify")
        assert r.returncode == 0 and f"(smtp: {project.app.config.state.socket})" in r.stderr, r.stderr
        r = project.run("smtpd", "--port", str(port))
        assert r.returncode != 0, r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert f"port {port} on 127.0.0.1 is in use by pid {proc.pid}" in line and "workflow" in line, line
        r = project.run("up", "--port", str(port))
        (line,) = r.stderr.strip().splitlines()
        assert r.returncode != 0 and f"port {port} on 127.0.0.1 is in use by pid {proc.pid}" in line, line
    with sock_mod.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        r = project.run("smtpd", "--port", str(busy))
        assert r.returncode != 0 and f"port {busy} on 127.0.0.1 is in use by pid {os.getpid()}" in r.stderr
    r = project.run("smtpd", "--port", "99999")
    assert r.returncode == 2 and "99999 is not in the range 0<=x<=65535" in r.stderr
    r = project.run("up", "--port", "-1")
    assert r.returncode == 2 and "not in the range" in r.stderr


def test_smtpd_says_its_start_and_stop_once(project: Project) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "workflow", "smtpd", "--port", "0"],
        cwd=project.dir,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")},
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert "listening on 127.0.0.1:" in first and "mail root" in first, first
    end = time.monotonic() + 10
    while not project.app.config.state.smtpd.exists():  # the address is recorded while it runs
        assert time.monotonic() < end
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=30)
    proc.stderr.close()
    text = first + rest
    assert text.count("listening on") == 1 and text.count("stopped:") == 1, text
    assert re.match(r"^\d\d:\d\d:\d\d smtpd: ", first), first  # the clock as agentd prints it
    assert not project.app.config.state.smtpd.exists()
