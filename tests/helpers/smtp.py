"""Helpers for SMTP tests: start the real server (in-process or as a subprocess), talk to it."""

from __future__ import annotations

import base64
import os
import re
import smtplib
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.project import TESTER, TESTER_PASSWORD
from helpers.tiers import spawning
from workflow.app import App
from workflow.delivery.credentials import client_credential
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import LocalSMTP, login
from workflow.mail.message import Draft, build, make_message_id


def auth_plain(greeting: bytes = b"") -> bytes:
    """The AUTH PLAIN line of the test projects' person login (``TESTER``), for raw SMTP dialogs
    on TCP (the owner logs in on the server's socket only)."""
    return b"AUTH PLAIN " + base64.b64encode(f"\0{TESTER}\0{TESTER_PASSWORD}".encode()) + b"\r\n"


def client(port: int, timeout: float = 10) -> smtplib.SMTP:
    """An SMTP client on TCP logged in as the test projects' person login (``TESTER``), who may
    send as any identity of the test roster."""
    s = smtplib.SMTP("127.0.0.1", port, timeout=timeout, local_hostname="tester")
    s.login(TESTER, TESTER_PASSWORD)
    return s


def owner(app: App, timeout: float = 10) -> smtplib.SMTP:
    """An SMTP client on the server's Unix socket logged in as the owner, as every workflow
    command logs in."""
    s = LocalSMTP(str(app.config.state.socket), timeout)
    credential = client_credential(mail_root=app.config.mail_root)
    login(s, credential.login, credential.secret)
    return s


def message(
    sender: str = "spec-writer",
    to: tuple[str, ...] = ("spec-reviewer",),
    event: str = "question",
    body: str = "Hello\n",
    mid: str | None = None,
    artifacts: tuple[str, ...] = ("specs/*/user-auth.md",),
    **kw: object,
) -> bytes:
    """A workflow message between roles (bare names), as built by our own composer."""
    return build(
        Draft(
            sender=f"{sender}@workflow.local",
            to=[f"{t}@workflow.local" for t in to],
            subject=f"[{event}] user-auth",
            body=body,
            message_id=mid or make_message_id(sender.split(".")[-1], "workflow.local"),
            event=event,
            artifacts=list(artifacts),
            **kw,  # type: ignore[arg-type]
        )
    )


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@spawning
@contextmanager
def server_process(
    project_dir: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    wrap: list[str] | None = None,
    preexec: object = None,
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``workflow smtpd --port 0`` as a real subprocess; yields (process, port)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    full_env.update(env or {})
    cmd = [*(wrap or []), sys.executable, "-m", "workflow", "smtpd", "--port", "0", *extra]
    proc = subprocess.Popen(
        cmd,
        cwd=project_dir,
        env=full_env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=preexec,
    )  # type: ignore[arg-type]
    port = 0
    deadline = time.monotonic() + 30
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        proc.kill()
        raise AssertionError("server did not start: " + (proc.stderr.read() if proc.stderr else ""))
    try:
        yield proc, port
    finally:
        for child in children(proc.pid):  # e.g. the server under strace: stop it, not only strace
            try:
                os.kill(child, 15)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()


@spawning
@contextmanager
def serving(app: App, workers: str) -> Iterator[int]:
    """A server for ``app``: one in this process ("1"), or `workflow smtpd --workers N` as a
    subprocess; yields its port."""
    if workers == "1":
        with BackgroundServer(app.config, app.deliverer) as port:
            yield port
        return
    assert app.config.path is not None
    with server_process(app.config.path.parent, "--workers", workers) as (_, port):
        yield port
