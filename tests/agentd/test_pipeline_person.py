"""The design's whole pipeline with a person in it: bob, a users-file login, takes spec-reviewer (the
built-in role file copied with ``mode = "human"``) and answers the review-request from msmtp with a
plain "Approve" and no headers of ours, every agent role on the real Claude Code from npm against
the stand-in model. It reaches done with no owner action, the pipeline test's
invariants hold, and bob's decision is handed on to skeleton-writer and test-writer by the role's
``hands_off``; afterwards `workflow doctor` exits 0 and the board raises no claims alarm. Then the
same with bob clicking Approve in the cockpit, in a real Chromium (the agents on the anthropic
backend: the same pipeline, in less time)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.agent_clis import needs_claude
from helpers.browser import chrome, log_in, steady, wait_for
from helpers.pipeline_model import PipelineModel
from helpers.pipeline_run import app_of, ask, check_invariants, copies, init, until_done, up
from helpers.project import Project
from helpers.sandboxing import needs_bwrap
from helpers.web import web_server
from workflow.app import App
from workflow.core.resources import builtin_dir
from workflow.mail.message import parse

PASSWORD = "bob-s3cret"


def workflow(proj: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workflow", *args],
        cwd=proj,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_bob(proj: Path, env: dict[str, str], home: Path) -> Path:
    """bob's login in the users file, spec-reviewer made his (human), the change trusted; his
    password file (the one msmtp reads)."""
    conf = home / ".config" / "workflow"
    conf.mkdir(parents=True, exist_ok=True)
    password = conf / "bob.password"
    password.write_text(PASSWORD + "\n")
    password.chmod(0o600)
    hashed = workflow(proj, env, "smtpd", "--hash-password", stdin=PASSWORD + "\n")
    assert hashed.returncode == 0, hashed.stderr
    (conf / "users").write_text(f"bob:{hashed.stdout.strip()}:spec-reviewer\n")
    toml = proj / "workflow.toml"
    toml.write_text(toml.read_text().replace("[smtp]\n", f'[smtp]\nauth_users_file = "{conf / "users"}"\n', 1))
    role = (builtin_dir("roles") / "spec-reviewer.md").read_text()
    (proj / "roles" / "spec-reviewer.md").write_text(re.sub(r'(?m)^mode = "async"$', 'mode = "human"', role))
    r = workflow(proj, env, "trust")
    assert r.returncode == 0, r.stderr
    return password


def review_request(app: App) -> str | None:
    for box, raw, _ in copies(app):
        m = parse(raw)
        if box == "spec-reviewer" and m.event == "review-request":
            return str(m.message_id)
    return None


def msmtp_reply(proj: Path, env: dict[str, str], password: Path, request: str, text: str) -> None:
    """bob's reply as msmtp sends it: To, Subject, In-Reply-To and his text, nothing of ours."""
    conf = workflow(proj, env, "client", "msmtp", "--login", "bob", "--password-file", str(password))
    assert conf.returncode == 0, conf.stderr
    rc = Path(env["HOME"]) / ".msmtprc-workflow"
    rc.write_text(conf.stdout)
    rc.chmod(0o600)
    mail = f"To: spec-writer@workflow.local\nSubject: Re: rate-limit\nIn-Reply-To: {request}\n\n{text}\n"
    r = subprocess.run(["msmtp", "-C", str(rc), "-t"], input=mail, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def handed_on(app: App) -> dict[str, list[str]]:
    """Each mailbox holding spec-reviewer's approval of rate-limit → its X-Next-Roles."""
    out = {}
    for box, raw, _ in copies(app):
        m = parse(raw)
        if m.event == "approval" and m.sender == "spec-reviewer@workflow.local":
            out[box] = list(m.next_roles)
    return out


@needs_bwrap
@needs_claude
def test_bob_approves_from_msmtp_and_the_pipeline_reaches_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every agent role on the real Claude Code from npm (`workflow init` finds it on PATH), in
    its sandbox, against the pipeline model."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))  # init's mail root is ~/.maildir/workflow: this test's own
    with PipelineModel() as model:
        proj, env = init(tmp_path, model, clis=True)
        password = make_bob(proj, env, home)
        app = app_of(proj)
        assert app.roster.roles["spec-reviewer"].mode == "human"
        log = tmp_path / "up.out"
        with up(proj, env, app, log) as proc:
            t0 = time.monotonic()
            ask(proj, env)
            end = time.monotonic() + 60
            while (request := review_request(app)) is None:
                assert time.monotonic() < end and proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.1)
            msmtp_reply(proj, env, password, request, "Approve")
            took = until_done(proj, app, model, proc, log, t0)
    print(f"pipeline with bob: first mail to done in {took:.1f}s; runs {model.runs()}")
    assert "spec-reviewer" not in model.runs()  # bob's role: no agent answered in his place
    check_invariants(proj, app, model)
    ran_on_claude_code(app, model)
    assert handed_on(app) == {
        "spec-writer": ["skeleton-writer", "test-writer"],
        "skeleton-writer": ["skeleton-writer", "test-writer"],
        "test-writer": ["skeleton-writer", "test-writer"],
    }
    head = subprocess.run(
        ["git", "log", "--format=%an", "--grep=proposed → todo", "--", "specs/todo/rate-limit.md"],
        cwd=proj,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "spec-reviewer" in head.stdout.split()  # bob's move, authored as his role
    # the requester (user) hears of done once: the implementer told them, so agentd (agentd.told) did not again
    done = [parse(raw) for box, raw, _ in copies(app) if box == "user" and parse(raw).event == "status-update"]
    assert [(m.sender, m.state) for m in done] == [("implementer@workflow.local", "done")], done
    doctor = workflow(proj, env, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    status = workflow(proj, env, "status")
    assert status.returncode == 0 and "claims" not in status.stdout and ", 0 flagged" in status.stdout, status.stdout


def ran_on_claude_code(app: App, model: PipelineModel) -> None:
    """Every run was Claude Code's: its log names the backend and the CLI's own transcript, which
    holds the run's finish; the model was asked for our tools by their MCP names."""
    logs = [f.read_text() for f in sorted(app.config.state.runs.glob("task-*.log"))]
    assert logs and all("running the claude-code backend" in log for log in logs), logs
    for log in logs:
        path = log.split("  transcript: ", 1)[1].split("\n", 1)[0]
        assert "mcp__workflow__finish" in Path(path).read_text(), path
    assert len(logs) == sum(model.runs().values()), (len(logs), model.runs())


def test_bob_clicks_approve_in_the_cockpit_and_the_pipeline_reaches_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same pipeline, bob deciding with the cockpit's Approve button in a real Chromium."""
    from selenium.webdriver.common.by import By

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    with PipelineModel() as model:
        proj, env = init(tmp_path, model)
        make_bob(proj, env, home)
        app = app_of(proj)
        log = tmp_path / "up.out"
        with up(proj, env, app, log) as proc, web_server(Project(proj, app)) as server, chrome() as bob:
            t0 = time.monotonic()
            ask(proj, env)
            log_in(bob, server.url, "bob", PASSWORD)
            card = 'section[data-state="proposed"] article[data-path="specs/proposed/rate-limit.md"] button.approve'

            def asked(d: object) -> bool:
                if not bob.find_elements(By.CSS_SELECTOR, card):
                    bob.get(server.url + "board")  # until the review-request is there
                return bool(bob.find_elements(By.CSS_SELECTOR, card))

            wait_for(bob, asked, "the review-request on bob's board", 60)
            steady(lambda: bob.find_element(By.CSS_SELECTOR, card).click())
            flash = wait_for(bob, lambda d: d.find_elements(By.CSS_SELECTOR, "#flash"), "the outcome")[0].text
            assert "approval sent to spec-writer" in flash, flash
            took = until_done(proj, app, model, proc, log, t0)
    print(f"pipeline with bob in the cockpit: first mail to done in {took:.1f}s; runs {model.runs()}")
    assert "spec-reviewer" not in model.runs()
    check_invariants(proj, app, model)
    assert handed_on(app) == {
        "spec-writer": ["skeleton-writer", "test-writer"],
        "skeleton-writer": ["skeleton-writer", "test-writer"],
        "test-writer": ["skeleton-writer", "test-writer"],
    }
    doctor = workflow(proj, env, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    status = workflow(proj, env, "status")
    assert status.returncode == 0 and "claims" not in status.stdout and ", 0 flagged" in status.stdout, status.stdout
