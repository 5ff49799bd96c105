"""workflow web over HTTP: logins, sessions, CSRF and origins, what a person may see, what a button
does — against a real `workflow web` (and `workflow smtpd`) over a real git project."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.agentd import default_sigint, wait_until
from helpers.git import GIT_ENV, sh
from helpers.project import Project, free_port
from helpers.runs import unread
from helpers.web import BOB, BOB_PASSWORD, Client, Server, add_person, owner_link
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.agents.report import RunReport
from workflow.panels.store import PanelStore

ROOT = Path(__file__).resolve().parents[2]


def _events(server: Server, client: Client, query: str) -> str:
    """The first event a page's stream sends (its main part when the page's copy is stale)."""
    req = urllib.request.Request(server.url + "events?" + query)
    cookies = "; ".join(f"{c.name}={c.value}" for c in client.jar)
    req.add_header("Cookie", cookies)
    out = b""
    with urllib.request.urlopen(req, timeout=10) as r:
        while b"event: main" not in out or not out.endswith(b"\n\n"):
            line = r.readline()
            if not line:
                break
            out += line
    return out.decode()


def test_a_person_sees_their_role_and_never_a_panel_thread_they_are_not_in(project: Project, server: Server) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    internal = project.send(
        "spec-writer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-writer-panel-internal",
        QUESTION="the-writers-secret-plan",
    )
    bob = Client(server.url)
    assert bob.get("/board")[0] == 303  # not logged in: to the login page
    assert bob.login(BOB, BOB_PASSWORD) == 303
    cookie = next(c for c in bob.jar if c.name == "workflow_session")
    assert cookie.has_nonstandard_attr("HttpOnly") or "httponly" in str(cookie._rest).lower()  # type: ignore[attr-defined]

    status, board = bob.get("/board")
    assert status == 200 and 'data-path="specs/proposed/user-auth.md"' in board
    assert 'value="approve"' in board and request in board.replace("&lt;", "<").replace("&gt;", ">")
    status, inbox = bob.get("/inbox")
    assert status == 200 and "[REVIEW REQUEST] user-auth" in inbox

    # the panel-internal thread: not found, and nothing of it anywhere bob looks
    for path in (f"/thread?id={internal}", f"/part?id={internal}&n=1"):
        status, body = bob.get(path.replace("<", "%3C").replace(">", "%3E").replace("@", "%40"))
        assert status == 404 and "the-writers-secret-plan" not in body
    for path in ("/board", "/inbox?all=1"):
        assert "the-writers-secret-plan" not in bob.get(path)[1] and internal not in bob.get(path)[1]
    stream = _events(server, bob, "page=board&v=stale")
    assert "event: main" in stream and "user-auth" in stream and "the-writers-secret-plan" not in stream
    req = urllib.request.Request(server.url + "events?page=thread&id=" + internal.strip("<>"))
    req.add_header("Cookie", f"workflow_session={cookie.value}")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 404
    e.value.close()

    # a member sees it
    owner = Client(server.url)
    assert owner.follow(owner_link(project)) == 303
    csrf = owner.csrf()
    assert owner.post("/role", {"csrf": csrf, "role": "spec-writer-panel.claude", "back": "/inbox"})[0] == 303
    status, page = owner.get("/thread?id=" + internal.replace("<", "%3C").replace(">", "%3E").replace("@", "%40"))
    assert status == 200 and "the-writers-secret-plan" in page
    # bob may not view as the member
    assert bob.post("/role", {"csrf": bob.csrf(), "role": "spec-writer-panel.claude"})[0] == 403


def test_forms_need_the_sessions_token_and_this_origin(project: Project, server: Server) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    bob = Client(server.url)
    bob.login(BOB, BOB_PASSWORD)
    csrf = bob.csrf()
    form = {"id": request, "verdict": "approve", "reason": "", "back": "/board"}
    assert bob.post("/act/decide", form)[0] == 403  # no token
    assert bob.post("/act/decide", {**form, "csrf": "0" * 40})[0] == 403  # another token
    assert bob.post("/act/decide", {**form, "csrf": csrf}, origin="http://evil.example")[0] == 403
    # no Origin (a hostile round): the Referer says where the form was, and another site is refused
    assert bob.post("/act/decide", {**form, "csrf": csrf}, origin=None, referer="http://evil.example/x")[0] == 403
    lookalike = server.url.rstrip("/") + ".evil.example/"  # this origin's text, another host
    assert bob.post("/act/decide", {**form, "csrf": csrf}, origin=None, referer=lookalike)[0] == 403
    assert bob.post("/login", {"login": BOB, "password": BOB_PASSWORD}, origin="http://evil.example")[0] == 403
    other = Client(server.url)
    other.login("tester", "tester-password")
    assert other.post("/act/decide", {**form, "csrf": csrf})[0] == 403  # bob's token is not the tester's
    assert (project.dir / "specs/proposed/user-auth.md").exists()  # nothing moved

    with urllib.request.urlopen(server.url + "login", timeout=10) as r:
        csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp

    # with the token, from this origin: bob's decision, one commit as spec-reviewer
    commits = int(sh(project, "git", "rev-list", "--count", "HEAD").stdout)
    status, _ = bob.post("/act/decide", {**form, "csrf": csrf, "reason": "complete"})
    assert status == 303
    assert (project.dir / "specs/todo/user-auth.md").exists()
    assert int(sh(project, "git", "rev-list", "--count", "HEAD").stdout) == commits + 1
    assert sh(project, "git", "log", "-1", "--format=%an").stdout.strip() == "spec-reviewer"
    flash = bob.get("/board")[1]
    assert "approval sent to spec-writer" in flash, flash

    # a second click: refused, saying why, nothing more moves
    bob.post("/act/decide", {**form, "csrf": csrf})
    page = bob.get("/board")[1]
    assert "Refused" in page and "is in todo/ now" in page
    assert int(sh(project, "git", "rev-list", "--count", "HEAD").stdout) == commits + 1
    # steering runs is the owner's (and the escalation roles')
    bob.post("/act/resume", {"csrf": csrf, "role": "implementer", "back": "/runs"})
    assert "may not resume" in bob.get("/runs")[1]


def test_a_refusal_names_its_rule(project: Project, server: Server) -> None:
    """A decision the server's rules refuse moves nothing, and the page says which rule refused:
    here the owner, viewing as spec-writer (no reviewer), approves a review-request sent to it."""
    request = project.send("implementer", "review-request", "specs/proposed/billing.md", "spec-writer")
    owner = Client(server.url)
    owner.follow(owner_link(project))
    csrf = owner.csrf()
    owner.post("/role", {"csrf": csrf, "role": "spec-writer"})
    assert 'value="approve"' in owner.get("/board")[1]
    owner.post("/act/decide", {"csrf": csrf, "id": request, "verdict": "approve", "reason": "", "back": "/board"})
    page = owner.get("/board")[1]
    assert "Refused by rule reviewer-decisions" in page, page
    assert (project.dir / "specs/proposed/billing.md").exists()  # nothing moved


def test_wrong_passwords_are_slowed_and_logged(project: Project, server: Server) -> None:
    """Five wrong passwords — the first alone, then four at once as a guesser sends them: after a
    failure, every attempt from the peer waits before it is checked, and each failure is logged."""
    c = Client(server.url)
    t0 = time.monotonic()
    assert c.login(BOB, "not-his-password") == 401
    first = time.monotonic() - t0

    def attempt(_: int) -> float:
        start = time.monotonic()
        assert Client(server.url).login(BOB, "still-not-it") == 401
        return time.monotonic() - start

    with ThreadPoolExecutor(4) as pool:
        waits = sorted(pool.map(attempt, range(4)))
    assert first < 0.4 <= waits[0], (first, waits)  # each waited the next failure's delay (0.5 s) before its check
    log = server.log.read_text()
    assert len(re.findall(r"refused AUTH from 127\.0\.0\.1 login=bob code=401 rule=-: WEB login failed", log)) == 5, log


def test_off_loopback_only_with_https(project: Project) -> None:
    for args in (["--host", "0.0.0.0"], ["--host", "0.0.0.0", "--allow-remote"]):
        r = subprocess.run(
            [sys.executable, "-m", "workflow", "web", "--port", "0", *args],
            cwd=project.dir,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode != 0 and "refusing to listen on 0.0.0.0" in r.stderr, r.stderr
    assert "HTTPS" in r.stderr and "[web] tls_cert" in r.stderr
    with socket.socket() as s:  # nothing listens
        s.bind(("127.0.0.1", 0))


def test_workflow_up_serves_the_cockpit_too(project: Project) -> None:
    port = free_port()
    toml = project.dir / "workflow.toml"
    toml.write_text(toml.read_text() + f"\n[web]\nport = {port}\n")
    out = project.dir.parent / "up.out"
    with open(out, "wb") as f:
        up = subprocess.Popen(
            [sys.executable, "-m", "workflow", "up", "--web"],
            cwd=project.dir,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV},
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=default_sigint,
        )
    try:
        wait_until(lambda: f"http://127.0.0.1:{port}/" in out.read_text(), "the cockpit's address")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=10) as r:
            assert r.status == 200 and b"Log in" in r.read()
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(30) in (0, 130, -signal.SIGINT), out.read_text()
    with socket.socket() as s:  # the cockpit stopped with it
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_the_owner_retries_a_dead_letter_and_sees_its_log(project: Project, server: Server) -> None:
    with Tasks(project.app.config.state.tasks) as tasks:
        t, _ = tasks.enqueue("implementer", ["<m1@workflow.local>"])
        tasks.finish(t.id, TaskStatus.FAILED, "run-role exited with status 1: boom", dead=True)
    runs = project.app.config.state.runs
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"task-{t.id}.log").write_text("starting\n<script>x</script> the agent fell over\n")
    RunReport(False, error="boom", usage={"input_tokens": 1000, "output_tokens": 234, "cost_microusd": 12300}).write(
        runs / f"task-{t.id}.json"
    )
    owner = Client(server.url)
    owner.follow(owner_link(project))
    page = owner.get("/runs")[1]
    assert (
        f'data-task="{t.id}"' in page
        and "dead" in page
        and "&lt;script&gt;x&lt;/script&gt; the agent fell over" in page
    )
    owner.post("/act/retry", {"csrf": owner.csrf("/runs"), "task": str(t.id), "back": "/runs"})
    assert f"task {t.id} (implementer) queued again" in owner.get("/runs")[1]
    with Tasks(project.app.config.state.tasks) as tasks:
        again = tasks.get(t.id)
    assert again.status == TaskStatus.QUEUED and not again.dead
    assert '"event": "requeued"' in project.app.config.state.agentd_log.read_text()


def test_a_session_ends_at_logout_and_when_the_password_changes(project: Project, server: Server) -> None:
    bob = Client(server.url)
    bob.login(BOB, BOB_PASSWORD)
    copy = Client(server.url)  # the same cookie, elsewhere
    for c in bob.jar:
        copy.jar.set_cookie(c)
    assert copy.get("/board")[0] == 200
    assert bob.post("/logout", {"csrf": bob.csrf()})[0] == 303
    assert copy.get("/board")[0] == 303  # to the login page: the copy ended with it

    bob = Client(server.url)
    bob.login(BOB, BOB_PASSWORD)
    assert bob.get("/inbox")[0] == 200
    users = Path(project.app.config.smtp.auth_users_file)
    users.write_text("\n".join(line for line in users.read_text().splitlines() if not line.startswith("bob:")) + "\n")
    add_person(project, BOB, "a-new-password", "spec-reviewer")
    assert bob.get("/inbox")[0] == 303
    assert bob.login(BOB, BOB_PASSWORD) == 401 and bob.login(BOB, "a-new-password") == 303


def test_a_sealed_panel_shows_how_many_filed_never_a_verdict(project: Project, server: Server) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/billing.md", "spec-reviewer-panel")
    panel = project.app.config.panel("spec-reviewer-panel")
    assert panel is not None
    with PanelStore(project.app.config.state.panels) as store:
        store.open(request, panel, "specs/proposed/billing.md", "spec-writer")
        store.file(request, "claude", "assessment", "reject", "SEALED-FINDING: the limits are missing")
    owner = Client(server.url)
    owner.follow(owner_link(project))
    page = owner.get("/board")[1]
    assert "spec-reviewer-panel: sealed (1/3 filed)" in page, page
    assert "SEALED-FINDING" not in page and "reject" not in page.lower().replace('value="reject"', "").replace(
        "<option>rejection</option>", ""
    )
    with PanelStore(project.app.config.state.panels) as store:
        store.update(request, state="decided", decision="approve")
    wait_until(lambda: "spec-reviewer-panel: decided — approve" in owner.get("/board")[1], "the decision shown")


def test_an_edit_of_the_roster_counts_at_once(project: Project, server: Server) -> None:
    """As for the SMTP server: a member taken off a panel sees its internal threads no more."""
    internal = project.send(
        "spec-writer-panel.claude", "question", "specs/*/user-auth.md", "spec-writer-panel-internal", QUESTION="inside"
    )
    thread = "/thread?id=" + internal.replace("<", "%3C").replace(">", "%3E").replace("@", "%40")
    owner = Client(server.url)
    owner.follow(owner_link(project))
    owner.post("/role", {"csrf": owner.csrf(), "role": "spec-writer-panel.gemini"})
    assert owner.get(thread)[0] == 200
    toml = project.dir / "workflow.toml"
    text = toml.read_text()
    start = text.index("[panels.spec-writer-panel]")
    members = text.index("members", start)
    end = text.index("\n", members)
    toml.write_text(text[:members] + 'members = ["claude", "gpt-5"]' + text[end:])
    status, page = owner.get(thread)
    assert status == 404 and "inside" not in page  # gemini is no member now: viewing as the owner's default role
    assert 'value="spec-writer-panel.gemini"' not in page


def test_a_refusal_page_escapes_what_was_asked(project: Project, server: Server) -> None:
    bob = Client(server.url)
    bob.login(BOB, BOB_PASSWORD)
    status, page = bob.post("/role", {"csrf": bob.csrf(), "role": "<img src=x onerror=alert(1)>"})
    assert status == 403 and "<img" not in page and "&lt;img src=x" in page


@pytest.mark.skipif(shutil.which("fail2ban-regex") is None, reason="fail2ban-regex (Debian fail2ban) not installed")
def test_the_fail2ban_filter_reads_the_cockpits_failed_logins(project: Project, server: Server) -> None:
    assert Client(server.url).login(BOB, "wrong") == 401
    assert Client(server.url).login(BOB, BOB_PASSWORD) == 303  # a login is no failure
    log = server.log.parent / "web-refusals.log"
    log.write_text(server.log.read_text())
    r = subprocess.run(
        ["fail2ban-regex", "-o", "ip", str(log), str(ROOT / "contrib/fail2ban/filter.d/workflow-smtpd.conf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.splitlines() == ["127.0.0.1"], r.stdout + r.stderr


def test_a_decided_request_is_read_and_shows_its_outcome_not_the_buttons(project: Project, server: Server) -> None:
    """Deciding marked nothing read, and a rejected request (the spec stays in proposed/) kept its
    buttons on the thread and the card: now the request is read and both say what was decided."""
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    bob = Client(server.url)
    bob.login(BOB, BOB_PASSWORD)
    csrf = bob.csrf()
    thread = f"/thread?id={urllib.parse.quote(request)}"
    assert 'value="reject"' in bob.get(thread)[1] and 'value="reject"' in bob.get("/board")[1]
    assert unread(project, "spec-reviewer") == 1
    form = {"csrf": csrf, "id": request, "verdict": "reject", "reason": "no error cases", "back": thread}
    assert bob.post("/act/decide", form)[0] == 303
    assert (project.dir / "specs/proposed/user-auth.md").exists()  # a rejection moves nothing
    assert unread(project, "spec-reviewer") == 0  # the request is read
    page = bob.get(thread)[1]
    assert 'value="reject"' not in page and "Decided: rejection by spec-reviewer" in page, page
    assert 'value="reject"' not in bob.get("/board")[1]


def test_the_runs_page_shows_where_each_role_lives_and_the_cockpit_binds_this_hosts_address(tmp_path: Path) -> None:
    from helpers.hosts import HOSTS, on_host
    from helpers.project import make_project
    from helpers.web import web_server

    p = make_project(tmp_path / "p", HOSTS)
    on_host(p, "implementer", "build")
    assert p.run("host", "build").returncode == 0
    with web_server(p) as server:
        assert server.url.startswith("http://127.0.0.3:"), server.url  # build's address, not [web] host
        owner = Client(server.url)
        owner.follow(owner_link(p))
        page = owner.get("/runs")[1]
    hosts = re.findall(r'<tr data-host="(\w+)"><td>[^<]*</td><td>([\d.]+)</td><td>([^<]*)</td>', page)
    assert [(h, a) for h, a, _ in hosts] == [("hub", "127.0.0.2"), ("build", "127.0.0.3")], page
    lives = {h: r for h, _, r in hosts}
    assert lives["build"] == "implementer" and "spec-writer" in lives["hub"], lives
    assert "build (this one)" in page
