"""Fail early and say the fix (issue 48, problem 6): a credential that does not reach the agents
is refused before the first run, with doctor's line; a CLI's own "Not logged in" becomes that line."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from helpers.agent_clis import cli_bin, fresh_project, needs_claude
from helpers.agentd import default_sigint
from helpers.sandboxing import needs_bwrap
from helpers.wire import Served
from workflow.agents.modelapi import Probe


def doctors_line(f: object) -> str:
    r = f.run("doctor")  # type: ignore[attr-defined]
    line = next(x for x in r.stdout.splitlines() if x.startswith("agent-cli: claude-code:"))
    assert "no credential reaches its agents" in line, r.stdout
    return line


@needs_claude
def test_up_and_agentd_refuse_to_start_without_a_credential_with_doctors_line(tmp_path: Path) -> None:
    """Problem 6: `workflow up` started without ANTHROPIC_API_KEY, and every run then failed."""
    f = fresh_project(tmp_path)  # default `workflow init`, a fresh HOME, no credential
    line = doctors_line(f)
    for argv in (("up",), ("up", "--web"), ("agentd", "run")):
        start = time.monotonic()
        r = f.run(*argv)
        took = time.monotonic() - start
        assert r.returncode == 3 and line in r.stderr, (argv, r.stdout, r.stderr)
        assert took < 5, f"{argv} took {took:.1f} s to refuse"
        assert "listening" not in r.stderr + r.stdout  # nothing was started


@needs_claude
def test_run_role_refuses_before_the_run_and_leaves_the_mail_unread(tmp_path: Path) -> None:
    f = fresh_project(tmp_path)
    f.notify("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = f.run("run-role", "--with-email", "spec-reviewer")
    assert r.returncode == 3 and doctors_line(f) in r.stderr, r.stdout + r.stderr
    assert f.unread("spec-reviewer") == 1


@needs_bwrap
@needs_claude
def test_the_clis_own_not_logged_in_and_its_json_become_our_one_line(tmp_path: Path) -> None:
    """A credential the check saw that the CLI still does not take (here a wrapper drops it on the
    way): the real Claude Code says "Not logged in · Please run /login" in 1.5 KB of JSON."""
    f = fresh_project(tmp_path)
    wrapper = tmp_path / "claude-without-key"
    wrapper.write_text(f'#!/bin/sh\nunset ANTHROPIC_API_KEY\nexec {cli_bin() / "claude"} "$@"\n')
    wrapper.chmod(0o755)
    toml = f.dir / "workflow.toml"
    toml.write_text(
        toml.read_text().replace("[backends.claude-code]", f'[backends.claude-code]\nprogram = "{wrapper}"')
        + '\n[runs]\nsandbox = "none"\n'
    )
    f.run("trust")
    f.notify("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = f.run("run-role", "--with-email", "spec-reviewer", ANTHROPIC_API_KEY="sk-x")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and f.unread("spec-reviewer") == 1, out
    assert doctors_line(f).split("agent-cli: ", 1)[1] in out, out
    assert "/login" not in out and '"session_id"' not in out, out


class Silent(Served):
    """A model API that takes every connection and never answers (until the test ends)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        release = self.release = threading.Event()
        asked = self.asked

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked.set()
                release.wait(60)

            def do_POST(self) -> None:
                self.do_GET()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.serve(Handler)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)


@needs_claude
def test_a_model_api_that_never_answers_is_said_while_waited_for_and_its_roles_paused(tmp_path: Path) -> None:
    """Problem 6: with the model API down, nothing was printed for 187 s."""
    f = fresh_project(tmp_path)
    toml = f.dir / "workflow.toml"
    toml.write_text(toml.read_text() + "\n[agentd]\nmodel_progress = 1\nmodel_wait = 3\n")
    f.run("trust")
    f.notify("--from", "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with Silent() as api:
        env = f.env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-x")
        up = subprocess.Popen(
            [str(Path(sys.executable).parent / "workflow"), "up"],
            cwd=f.dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=default_sigint,
        )
        seen: list[str] = []
        try:
            assert up.stdout is not None
            for line in up.stdout:  # as it comes
                seen.append(line)
                if "paused" in line and "spec-reviewer" in line:
                    break
        finally:
            up.send_signal(signal.SIGINT)
            rest, _ = up.communicate(timeout=60)
    out = "".join(seen)
    assert api.asked.is_set()
    assert f"waiting for the model API at {api.url}: 1 s" in out, out + rest
    assert f"waiting for the model API at {api.url}: 2 s" in out, out + rest
    assert f"the model API at {api.url} did not answer in 3 s" in out, out + rest
    assert "started     spec-reviewer" not in out + rest and f.unread("spec-reviewer") == 1  # no run spent on it
    status = f.run("agentd", "status").stdout
    assert "spec-reviewer" in status.split("paused")[1] and "did not answer" in status, status


class Answering(Served):
    """A stand-in with no GET of its own: BaseHTTPRequestHandler answers 501."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

        self.serve(Handler)


def test_a_model_api_that_answers_or_refuses_is_not_waited_for() -> None:
    """Any HTTP answer (a 501 to a GET) means the API is up; a refused connection is no wait
    either (the runs fail at once on it, saying so)."""
    said: list[str] = []
    with Silent() as silent:
        closed = silent.url  # nothing listens there once it stopped
    with Answering() as answering:
        for url in (closed, answering.url):
            probe = Probe(url, 0.2, 5, said.append).begin()
            assert probe.done.wait(3) and not probe.failed and said == [], (url, said)
