"""Web: a real `workflow web` server over a project, people's logins, and HTTP as a browser sends it."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from helpers.agentd import default_sigint, wait_until
from helpers.git import GIT_ENV
from helpers.project import Project
from workflow.delivery.credentials import hash_password, owner_secret

BOB, BOB_PASSWORD = "bob", "bob-password"  # a person whose login may send as spec-reviewer only


def add_person(p: Project, login: str, password: str, roles: str) -> None:
    """A line more in the project's users file (the server reads it again when it changes)."""
    users = Path(p.app.config.smtp.auth_users_file)
    with open(users, "a") as f:
        f.write(f"{login}:{hash_password(password, 'websalt', 1)}:{roles}\n")


def owner_password() -> str:
    return owner_secret()


class Server(NamedTuple):
    url: str  # http://127.0.0.1:PORT/
    proc: subprocess.Popen[bytes]
    log: Path


@contextmanager
def web_server(p: Project, *args: str) -> Iterator[Server]:
    """`workflow web --port 0` in the project, until the block ends (its log in ``web.log``)."""
    log = p.dir.parent / f"web-{os.getpid()}-{len(list(p.dir.parent.glob('web-*.log')))}.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workflow", "web", "--port", "0", *args],
            cwd=p.dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=default_sigint,
        )
    try:
        url = _wait_url(log, proc)
        yield Server(url, proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_url(log: Path, proc: subprocess.Popen[bytes]) -> str:
    found: list[str] = []

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"workflow web exited {proc.returncode}: {log.read_text()}")
        m = re.search(r"workflow web: (http\S+)", log.read_text())
        if m:
            found.append(m.group(1))
        return bool(found)

    wait_until(ready, "workflow web to listen")
    return found[0]


class Client:
    """A cookie-keeping HTTP client that sends what a browser's same-origin form sends."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect())

    def get(self, path: str) -> tuple[int, str]:
        return self._open(urllib.request.Request(self.url.rstrip("/") + path))

    def post(self, path: str, fields: dict[str, str], origin: str | None = "self") -> tuple[int, str]:
        req = urllib.request.Request(self.url.rstrip("/") + path, urllib.parse.urlencode(fields).encode())
        if origin is not None:
            req.add_header("Origin", self.url.rstrip("/") if origin == "self" else origin)
        return self._open(req)

    def login(self, login: str, password: str) -> int:
        return self.post("/login", {"login": login, "password": password})[0]

    def csrf(self, path: str = "/board") -> str:
        status, html = self.get(path)
        m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
        assert m, (status, html[:500])
        return m.group(1)

    def _open(self, req: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read().decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None
