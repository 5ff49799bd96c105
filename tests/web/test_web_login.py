"""workflow web's port and the owner's login, from the attacker's side: a process that listens on
the cockpit's port — on the loopback family the cockpit left free, or while it is down — gets
neither a person's password nor the owner's secret, and the owner logs in with a one-time link
(good once, never after a restart) instead of typing the secret into a page. Real `workflow web`
subprocesses, a real squatting process, a real Chromium, a real bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.browser import chrome, wait_for
from helpers.git import GIT_ENV, sh
from helpers.project import Project
from helpers.sandboxing import needs_bwrap
from helpers.web import (
    BOB,
    BOB_PASSWORD,
    Client,
    Server,
    Squatter,
    free_port_both,
    has_ipv6_loopback,
    owner_link,
    web_refused,
    web_server,
)
from workflow.delivery.credentials import owner_secret

needs_ipv6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="this host has no IPv6 loopback (::1)")
BIN = Path(sys.executable).parent


def _owner_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV}


def _web_login(p: Project) -> subprocess.CompletedProcess[str]:
    """`workflow web login` as the owner types it."""
    return subprocess.run(
        [sys.executable, "-m", "workflow", "web", "login"],
        cwd=p.dir,
        env=_owner_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )


def _type_login(driver: Any, login: str, password: str) -> None:
    """What a person does on whatever page says "log in": type and submit."""
    from selenium.webdriver.common.by import By

    wait_for(driver, lambda d: d.find_elements(By.ID, "password"), "a login form")
    driver.find_element(By.ID, "login").send_keys(login)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "submit").click()


@needs_ipv6
@pytest.mark.parametrize("family", ["::1", "127.0.0.1"])
def test_a_squatter_on_either_loopback_family_keeps_the_cockpit_from_starting(project: Project, family: str) -> None:
    port = free_port_both()
    with Squatter(project.dir.parent, family, port) as squatter:
        assert squatter.listening
        said = web_refused(project, "--port", str(port))
        assert f"port {port} on {family} is in use by pid {squatter.pid}" in said, said
    for other in ("127.0.0.1", "::1"):  # the cockpit let go of what it had bound before it refused
        with Squatter(project.dir.parent, other, port) as free:
            assert free.listening, other


@needs_ipv6
def test_chromium_at_localhost_never_reaches_a_squatter_that_came_after_the_cockpit(project: Project) -> None:
    """The cockpit runs on 127.0.0.1; an agent then listens on [::1] on its port. Chromium opening
    http://localhost:PORT/login (a name the cockpit accepts) tries ::1 first. The squatter must
    not get the port, and nothing a person or the owner types reaches it."""
    secret = owner_secret()
    with web_server(project) as server:
        port = server.port
        with Squatter(project.dir.parent, "::1", port) as squatter, chrome() as browser:
            browser.get(f"http://localhost:{port}/login")
            wait_for(browser, lambda d: "log in" in d.title, "a login page")
            _type_login(browser, "~owner", secret)  # what the README said the owner does
            wait_for(browser, lambda d: "/login" in d.current_url, "the answer")
            answer = browser.page_source
            assert secret.encode() not in squatter.received(), "the squatter received the owner's secret"
            browser.get(f"http://localhost:{port}/login")
            _type_login(browser, BOB, BOB_PASSWORD)
            wait_for(browser, lambda d: d.current_url.endswith("/board"), "bob's board")
            received = squatter.received()
            assert secret.encode() not in received and BOB_PASSWORD.encode() not in received
            assert received == b"", received[:2000]
            assert not squatter.listening
            assert browser.current_url == f"http://127.0.0.1:{port}/board"  # redirected to the one name
        assert "workflow web login" in answer  # the owner's password login refused, saying what to do


@needs_ipv6
def test_a_request_naming_another_loopback_host_is_sent_to_127_0_0_1(server: Server) -> None:
    """The one name: cookies and the owner's link belong to 127.0.0.1, so ``localhost`` and
    ``[::1]`` (reached on either family the cockpit holds) are redirected there, a form's POST too."""
    port = server.port
    for connect, host, method in (
        ("::1", f"[::1]:{port}", "GET"),
        ("127.0.0.1", f"localhost:{port}", "GET"),
        ("::1", f"localhost:{port}", "POST"),
    ):
        with socket.create_connection((connect, port), timeout=10) as s:
            s.sendall(
                f"{method} /login?x=1 HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        head = answer.decode("latin-1").split("\r\n\r\n")[0].lower()
        assert head.startswith("http/1.1 307"), (connect, host, head)
        assert f"location: http://127.0.0.1:{port}/login?x=1" in head, head


def test_the_owner_logs_in_with_a_one_time_link_good_once_and_not_after_a_restart(project: Project) -> None:
    port = free_port_both()
    with web_server(project, "--port", str(port)) as server:
        link = server.link
        assert link.startswith(f"http://127.0.0.1:{port}/login?once=")
        with chrome() as owner:
            owner.get(link)
            wait_for(owner, lambda d: d.current_url.endswith("/board"), "the owner's board")
            assert "~owner as" in owner.find_element("css selector", "header").text
        thief = Client(server.url)  # the same link again (a copy from the terminal's scrollback)
        status, page = thief.get(link.removeprefix(server.url.rstrip("/")))
        assert status == 403 and "used already or expired" in page, (status, page[:500])
        assert thief.get("/board")[0] == 303  # no session came of it: to the login page

        asked = _web_login(project)  # a fresh link for a running server, over its Unix socket
        assert asked.returncode == 0, asked.stderr
        fresh = asked.stdout.strip()
        assert fresh.startswith(f"http://127.0.0.1:{port}/login?once=") and fresh != link
        assert thief.follow(fresh) == 303 and thief.get("/board")[0] == 200
        unused = owner_link(project)

        # the owner's secret typed into the form: refused without a session, saying to use the link
        c = Client(server.url)
        status, page = c.post("/login", {"login": "~owner", "password": owner_secret()})
        assert status == 403 and "workflow web login" in page, (status, page[:500])
        assert not [k for k in c.jar if k.name == "workflow_session"]
    with web_server(project, "--port", str(port)) as again:
        later = Client(again.url)
        status, page = later.get(unused.removeprefix(again.url.rstrip("/")))  # minted before the restart, never used
        assert status == 403 and "used already or expired" in page, (status, page[:500])
    down = _web_login(project)
    assert down.returncode != 0 and "no workflow web runs" in down.stderr, down.stderr


def test_no_other_user_gets_a_link(project: Project) -> None:
    """Another local user (uid 65534) asking the running cockpit for a link is refused."""
    with web_server(project):
        probe = (
            "import os, socket, sys\nos.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect(sys.argv[1]); print('connected', s.recv(200))\n"
            "except OSError as e:\n    print('refused', e.errno)\n"
        )
        where = str(project.app.config.state.root / "sock" / "web")
        assert os.path.exists(where)
        r = subprocess.run(["/usr/bin/python3", "-c", probe, where], capture_output=True, text=True, timeout=30)
        assert r.stdout.startswith("refused"), r.stdout + r.stderr


AGENT = """\
import json, os, socket, subprocess, sys
from pathlib import Path

port, sock = int(sys.argv[1]), sys.argv[2]
results = {}
for host in ("127.0.0.1", "::1"):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        s.bind((host, port))
        s.listen(1)
        results["listen on " + host] = "bound"
    except OSError as e:
        results["listen on " + host] = "refused %d" % e.errno
r = subprocess.run([BIN + "/workflow", "web", "login"], capture_output=True, text=True)
results["workflow web login"] = (r.returncode, r.stdout, r.stderr[-300:])
try:
    c = socket.socket(socket.AF_UNIX)
    c.connect(sock)
    results["the cockpit's socket"] = c.recv(300).decode()
except OSError as e:
    results["the cockpit's socket"] = "refused %d" % e.errno
Path(os.environ["WORKFLOW_PROJECT"], "attempts.json").write_text(json.dumps(results))
subprocess.run([sys.executable, "-m", "workflow", "finish", "done", "tried"])
"""


@needs_bwrap
@needs_ipv6
def test_an_agent_in_its_sandbox_can_neither_squat_the_running_cockpit_nor_get_a_link(project: Project) -> None:
    p = project
    sock = str(p.app.config.state.root / "sock" / "web")
    with web_server(p) as server:
        (p.dir / "agent.py").write_text(AGENT.replace("BIN + ", f"{str(BIN)!r} + "))
        with open(p.dir / "workflow.toml", "a") as f:
            f.write(
                f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py", "{server.port}", "{sock}"]\ntimeout = 60\n'
            )
        (p.dir / ".gitignore").write_text("mail/\nattempts.json\n")
        sh(p, "git", "add", "-A")
        sh(p, "git", "commit", "-qm", "the agent")
        p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
        r = subprocess.run(
            [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", "spec-writer"],
            cwd=p.dir,
            env=_owner_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        tried = json.loads((p.dir / "attempts.json").read_text())
        assert tried["listen on 127.0.0.1"].startswith("refused"), tried
        assert tried["listen on ::1"].startswith("refused"), tried
        code, out, _ = tried["workflow web login"]
        assert code != 0 and "once=" not in out, tried
        assert tried["the cockpit's socket"].startswith("refused"), tried


def test_with_no_link_nothing_is_printed_and_the_owner_asks_for_one(project: Project) -> None:
    """As the systemd unit starts it: no link in the journal; `workflow web login` gives one."""
    with web_server(project, "--no-link") as server:
        assert "once=" not in server.log.read_text()
        asked = _web_login(project)
        assert asked.returncode == 0, asked.stderr
        assert Client(server.url).follow(asked.stdout.strip()) == 303
