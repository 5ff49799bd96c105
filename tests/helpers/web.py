"""Web: a real `workflow web` server over a project, people's logins, HTTP as a browser sends it,
and a squatter — another process listening on the cockpit's port — that records what it receives."""

from __future__ import annotations

import http.cookiejar
import os
import re
import socket
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
from helpers.tiers import spawning
from workflow.delivery.credentials import hash_password
from workflow.web.once import ask

BOB, BOB_PASSWORD = "bob", "bob-password"  # a person whose login may send as spec-reviewer only


def add_person(p: Project, login: str, password: str, roles: str) -> None:
    """A line more in the project's users file (the server reads it again when it changes)."""
    users = Path(p.app.config.smtp.auth_users_file)
    with open(users, "a") as f:
        f.write(f"{login}:{hash_password(password, 'websalt', 1)}:{roles}\n")


def owner_link(p: Project) -> str:
    """A fresh one-time login link from the project's running cockpit, asked for as
    `workflow web login` asks (over its Unix socket)."""
    return ask(p.app.config.state.web_socket)


class Server(NamedTuple):
    url: str  # http://127.0.0.1:PORT/
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def port(self) -> int:
        return int(urllib.parse.urlparse(self.url).port or 0)

    @property
    def link(self) -> str:
        """The one-time login link the server printed for the owner when it started."""
        m = re.search(r"(http://\S+/login\?once=\S+)", self.log.read_text())
        assert m, f"no login link printed: {self.log.read_text()}"
        return m.group(1)


@spawning
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


@spawning
def web_refused(p: Project, *args: str) -> str:
    """`workflow web ARGS` that must refuse to start: what it said (AssertionError if it serves)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV}
    log = p.dir.parent / f"web-refused-{os.getpid()}-{len(list(p.dir.parent.glob('web-refused-*.log')))}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workflow", "web", *args], cwd=p.dir, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: proc.poll() is not None or "workflow web: http" in log.read_text(), "workflow web's answer")
        if proc.poll() is None:
            raise AssertionError(f"workflow web started: {log.read_text()}")
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)
    assert proc.returncode != 0, log.read_text()
    return log.read_text()


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

    def post(
        self, path: str, fields: dict[str, str], origin: str | None = "self", referer: str | None = None
    ) -> tuple[int, str]:
        req = urllib.request.Request(self.url.rstrip("/") + path, urllib.parse.urlencode(fields).encode())
        if origin is not None:
            req.add_header("Origin", self.url.rstrip("/") if origin == "self" else origin)
        if referer is not None:
            req.add_header("Referer", referer)
        return self._open(req)

    def login(self, login: str, password: str) -> int:
        return self.post("/login", {"login": login, "password": password})[0]

    def follow(self, link: str) -> int:
        """Open the owner's one-time login link (303 to the board when it is good)."""
        base = self.url.rstrip("/")
        assert link.startswith(base + "/"), (link, base)
        return self.get(link[len(base) :])[0]

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


SQUATTER = r"""
import socket, sys, threading
host, port, record = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
try:
    s.bind((host, port))
    s.listen(16)
except OSError as e:
    print("refused", e.errno, flush=True)
    sys.exit(0)
print("listening", flush=True)
PAGE = (b'<!doctype html><title>log in</title><form method="post" action="/login">'
        b'<input name="login" id="login"><input name="password" id="password" type="password">'
        b'<button type="submit" id="submit">Log in</button></form><p id="squatter">the squatter</p>')
lock = threading.Lock()

def serve(c):
    c.settimeout(5)
    data = b""
    try:
        while True:
            chunk = c.recv(65536)
            with lock, open(record, "ab") as f:
                f.write(chunk)
            if not chunk:
                return
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = [int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")]
                if len(body) >= (length[0] if length else 0):
                    break
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE)
    except OSError:
        pass
    finally:
        c.close()

while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


@spawning
class Squatter:
    """Another process (an agent, another local user) listening on ``host:port``: a login page
    of its own, every byte anyone sends it recorded. ``listening`` says whether it got the port."""

    def __init__(self, base: Path, host: str, port: int) -> None:
        self.host, self.port = host, port
        name = f"squatter-{host.replace(':', '_')}-{port}"
        self.record, self.out = base / f"{name}.bytes", base / f"{name}.out"
        self.record.write_bytes(b"")
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SQUATTER, host, str(port), str(self.record)], stdout=out
            )
        wait_until(lambda: bool(self.out.read_text().strip()), "the squatter's bind")
        self.listening = self.out.read_text().startswith("listening")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def received(self) -> bytes:
        return self.record.read_bytes()

    def __enter__(self) -> Squatter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


def free_port_both() -> int:
    """A port nothing listens on at 127.0.0.1 nor at ::1."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
            if not has_ipv6_loopback():
                return port
            try:
                with socket.socket(socket.AF_INET6) as s6:
                    s6.bind(("::1", port))
            except OSError:
                continue
            return port
