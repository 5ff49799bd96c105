"""run-role end to end: scripted, command and anthropic backends (a fake Messages API at the wire),
read state on success and failure, tools that enforce the rules, context isolation, -i sessions."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.fake_anthropic import FakeAnthropic, text, tool_use
from helpers.git import GIT_ENV, git_project, mail
from helpers.project import Project
from helpers.runs import anthropic_env, script, unread

REVIEW = [
    {"tool": "read_artifact", "path": "specs/*/user-auth.md"},
    {"tool": "move_artifact", "artifact": "user-auth", "state": "todo", "reason": "Complete"},
    {
        "tool": "send_message",
        "event": "approval",
        "artifact": "specs/*/user-auth.md",
        "to": ["spec-writer"],
        "in_reply_to": "$first",
        "variables": {"NEXT_STATE": "todo", "NEXT_ROLES": "test-writer"},
    },
]


@pytest.fixture
def gp(tmp_path: Path) -> Project:
    return git_project(tmp_path / "rr")


def test_scripted_reviewer_approves_moves_and_marks_read(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="look")
    script(gp, "spec-reviewer", REVIEW)
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run succeeded" in r.stdout and "1 message(s) marked read" in r.stdout
    assert (gp.dir / "specs" / "todo" / "user-auth.md").exists()
    got = mail(gp, "approval")
    assert sorted(b for b, *_ in got) == ["spec-writer", "test-writer"]
    assert all(m[2] == "todo" for m in got)
    assert unread(gp, "spec-reviewer") == 0
    # the move tells once what every move tells (issue 48: as `workflow move` from a run's shell does)
    told = mail(gp, "status-update")
    assert sorted(b for b, *_ in told) == ["implementer", "skeleton-writer", "test-writer"], told
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0 and "nothing to do" in r.stdout


def test_a_failed_run_leaves_mail_unread_and_sends_nothing(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    script(
        gp,
        "spec-reviewer",
        [
            {
                "tool": "send_message",
                "event": "question",
                "artifact": "specs/*/user-auth.md",
                "to": ["spec-writer"],
                "in_reply_to": "$first",
                "variables": {"QUESTION": "q"},
            },
            {"fail": "the agent crashed"},
        ],
    )
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1
    assert "run failed" in r.stdout and "the agent crashed" in r.stdout
    assert "1 message(s) left unread for the next run; 1 queued message(s) not sent" in r.stdout
    assert unread(gp, "spec-reviewer") == 1
    assert mail(gp, "question") == []
    script(gp, "spec-reviewer", REVIEW)  # the next run retries the same mail
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout
    assert unread(gp, "spec-reviewer") == 0 and len(mail(gp, "approval")) == 2 and mail(gp, "question") == []


def test_tools_enforce_the_rules(gp: Project) -> None:
    outside = gp.dir.parent / "secret.txt"
    outside.write_text("top secret")
    os.symlink(outside, gp.dir / "specs" / "proposed" / "link.md")
    cases = [
        (
            "test-writer",
            {"tool": "move_artifact", "artifact": "user-auth", "state": "todo"},
            "test-writer may not move",
        ),
        ("spec-writer", {"tool": "read_artifact", "path": "specs/proposed/../../../secret.txt"}, "'..' is not allowed"),
        ("spec-writer", {"tool": "read_artifact", "path": "specs/proposed/link.md"}, "no artifact matches"),
        ("spec-writer", {"tool": "write_artifact", "path": "README.md", "content": "x"}, "not ROOT/STATE/NAME"),
        (
            "spec-writer",
            {"tool": "write_artifact", "path": "specs/todo/user-auth.md", "content": "x"},
            "already exists as specs/proposed/user-auth.md",
        ),
        (
            "spec-writer",
            {
                "tool": "send_message",
                "event": "question",
                "artifact": "specs/*/user-auth.md",
                "to": ["spec-reviewer-panel-internal"],
                "variables": {"QUESTION": "q"},
            },
            "internal-members-only",
        ),
        (
            "spec-writer",
            {"tool": "send_message", "event": "approval", "artifact": "specs/*/user-auth.md", "to": ["spec-reviewer"]},
            "reviewer-decisions",
        ),
    ]
    for role, step, refusal in cases:
        gp.send("coordinator", "question", "specs/*/user-auth.md", role, QUESTION="go")
        script(gp, role, [step])
        r = gp.run("run-role", "--with-email", role, env=GIT_ENV)
        assert r.returncode == 1, (role, step, r.stdout)
        assert refusal in r.stdout, (refusal, r.stdout)
    assert (gp.dir / "specs" / "proposed" / "user-auth.md").exists() and not (gp.dir / "README.md").exists()


def test_reviewer_context_holds_nothing_from_writer_internal_mail(tmp_path: Path) -> None:
    from workflow.agents.context import build
    from workflow.app import App
    from workflow.core.config import load_config
    from workflow.mail.inbox import select

    p = git_project(tmp_path / "iso", '[backends.scripted]\nrecord_dir = "prompts"\n')
    secret = "ZEBRA-CONFIDENTIAL-42"
    internal = p.send(
        "spec-writer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-writer-panel-internal",
        QUESTION=f"between us writers: {secret}",
    )
    p.send(
        "spec-writer-panel", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel", CONTEXT="please"
    )
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="solo please")
    # The solo reviewer, through the real CLI; the recording scripted backend keeps the prompt it got.
    script(p, "spec-reviewer", [{"say": "read it"}])
    r = p.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout
    (prompt,) = [f.read_text() for f in (p.dir / "prompts").glob("spec-reviewer-*.prompt.md")]
    assert "solo please" in prompt and "# User auth" in prompt
    assert secret not in prompt and internal not in prompt
    # A reviewer panel member's context, built from its own mailbox.
    app = App(load_config(p.dir / "workflow.toml", env={}))
    boxes = app.roster.mailboxes_of("spec-reviewer-panel.claude")
    with app.index() as index:
        index.refresh()
        ctx = build(app, app.roster.roles["spec-reviewer"], index, select(index, boxes))
    assert "please" in ctx.prompt and secret not in ctx.prompt and internal not in ctx.prompt


def test_command_backend_runs_an_agent_cli_that_calls_workflow_notify(gp: Project) -> None:
    agent = gp.dir / "agent.py"
    agent.write_text(
        textwrap.dedent(f"""\
        import os, subprocess, sys
        prompt = sys.stdin.read()
        assert "# Role: spec-reviewer" in prompt and "CONTEXT-MARKER" in prompt, prompt[:300]
        assert os.environ["WORKFLOW_ROLE"] == "spec-reviewer" and os.environ["WORKFLOW_PROJECT"]
        mode = open(os.path.join(os.environ["WORKFLOW_PROJECT"], "mode")).read().strip()
        if mode == "fail":
            print("cannot do it", file=sys.stderr); sys.exit(3)
        if mode == "hang":
            import time; time.sleep(60)
        assert "$WORKFLOW_NEW_MAIL" in prompt and os.path.exists(os.environ["WORKFLOW_NEW_MAIL"])
        subprocess.run([{sys.executable!r}, "-c", "from workflow.cli.notify import main; main()",
                        "question", "specs/*/user-auth.md", "spec-writer", "QUESTION=from the agent CLI"], check=True)
        subprocess.run([{sys.executable!r}, "-m", "workflow", "finish", "done", "asked a question"], check=True)
    """)
    )
    (gp.dir / "workflow.toml").write_text(
        (gp.dir / "workflow.toml").read_text()
        + f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 5\n'
    )
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="CONTEXT-MARKER")
    (gp.dir / "mode").write_text("fail")
    r = gp.run("run-role", "--with-email", "--backend", "command", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1 and "exited with status 3: cannot do it" in r.stdout
    assert unread(gp, "spec-reviewer") == 1
    (gp.dir / "mode").write_text("hang")
    t0 = time.monotonic()
    r = gp.run("run-role", "--with-email", "--backend", "command", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1 and "timed out after 5s" in r.stdout and time.monotonic() - t0 < 30
    (gp.dir / "mode").write_text("ok")
    r = gp.run(
        "run-role", "--with-email", "--email-poll-interval", "0.2", "--backend", "command", "spec-reviewer", env=GIT_ENV
    )
    assert r.returncode == 0, r.stdout
    assert "asked a question" in r.stdout
    assert mail(gp, "question") == [("spec-writer", "question", "proposed", ("specs/*/user-auth.md",))]
    assert unread(gp, "spec-reviewer") == 0


def test_anthropic_backend_round_trips_tools_and_reports_usage(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic() as fake:
        fake.add(tool_use("read_artifact", {"path": "specs/*/user-auth.md"}, "toolu_a", (100, 20)))
        fake.add(tool_use("move_artifact", {"artifact": "user-auth", "state": "done"}, "toolu_b", (120, 10)))
        fake.add(
            tool_use(
                "send_message",
                {
                    "event": "rejection",
                    "artifact": "specs/*/user-auth.md",
                    "to": ["spec-writer"],
                    "variables": {"REASON": "needs error cases"},
                },
                "toolu_c",
                (130, 30),
            )
        )
        fake.add(
            tool_use("finish", {"status": "done", "summary": "Rejected: error cases missing."}, "toolu_d", (140, 8))
        )
        r = gp.run("run-role", "--with-email", "--backend", "anthropic", "spec-reviewer", env=anthropic_env(fake))
        reqs = fake.requests
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(reqs) == 4
    assert reqs[0]["messages"][0]["content"].startswith("# Role: spec-reviewer")
    assert {t["name"] for t in reqs[0]["tools"]} == {
        "read_artifact",
        "write_artifact",
        "move_artifact",
        "send_message",
        "list_inbox",
        "read_thread",
        "whoami",
        "finish",
    }
    first_result = reqs[1]["messages"][-1]["content"][0]
    assert first_result["tool_use_id"] == "toolu_a" and "# User auth" in first_result["content"]
    refused = reqs[2]["messages"][-1]["content"][0]
    assert refused["is_error"] is True and "illegal transition proposed → done" in refused["content"]
    assert "tokens: 490 in, 68 out, 4 turn(s)" in r.stdout and "Rejected: error cases missing." in r.stdout
    assert mail(gp, "rejection") == [("spec-writer", "rejection", "proposed", ("specs/*/user-auth.md",))]
    assert unread(gp, "spec-reviewer") == 0


def test_a_model_that_only_talks_keeps_nothing_and_its_mail_stays_unread(gp: Project) -> None:
    """Issue 35: a run that ends without the agent's finish("done") must not mark its mail read."""
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic() as fake:
        fake.add(
            tool_use(
                "send_message",
                {"event": "question", "artifact": "specs/*/user-auth.md", "to": ["spec-writer"]},
                "toolu_a",
            )
        )
        fake.add(text("I would approve this."))
        r = gp.run("run-role", "--with-email", "--backend", "anthropic", "spec-reviewer", env=anthropic_env(fake))
    assert r.returncode == 1 and "never called finish" in r.stdout, r.stdout
    assert unread(gp, "spec-reviewer") == 1 and mail(gp, "question") == []
    with FakeAnthropic() as fake:
        fake.add(tool_use("finish", {"status": "failed", "summary": "the spec is not mine to judge"}))
        r = gp.run("run-role", "--with-email", "--backend", "anthropic", "spec-reviewer", env=anthropic_env(fake))
    assert r.returncode == 1 and "finished its run as failed: the spec is not mine to judge" in r.stdout, r.stdout
    assert unread(gp, "spec-reviewer") == 1


@pytest.mark.parametrize(
    "status,kind,expect",
    [
        (401, "authentication_error", "Anthropic API 401: authentication failed"),
        (500, "api_error", "Anthropic API 500: server error"),
        (429, "rate_limit_error", "Anthropic API 429: rate limited; retry after 7s"),
    ],
)
def test_anthropic_errors_fail_the_run_cleanly(gp: Project, status: int, kind: str, expect: str) -> None:
    (gp.dir / "workflow.toml").write_text(
        (gp.dir / "workflow.toml").read_text() + "\n[backends.anthropic]\nmax_retries = 0\n"
    )
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic() as fake:
        fake.error(status, kind, {"retry-after": "7"} if status == 429 else None)
        r = gp.run("run-role", "--with-email", "--backend", "anthropic", "spec-reviewer", env=anthropic_env(fake))
    assert r.returncode == 1, r.stdout
    assert expect in r.stdout and "Traceback" not in r.stderr
    assert unread(gp, "spec-reviewer") == 1


def test_anthropic_429_is_retried_after_retry_after_and_new_mail_reaches_the_next_turn(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic() as fake:
        fake.error(429, "rate_limit_error", {"retry-after": "0"})
        fake.add(tool_use("list_inbox", {}, "toolu_1"))
        fake.add(tool_use("finish", {"status": "done", "summary": "read it"}, "toolu_2"))

        def during(n: int) -> None:
            if n == 2:  # the first real model turn: mail arrives while the agent works
                gp.send("spec-writer", "answer", "specs/*/user-auth.md", "spec-reviewer", CONTEXT="LATE-NEWS")
                time.sleep(0.6)

        fake.on_request = during
        r = gp.run(
            "run-role",
            "--with-email",
            "--email-poll-interval",
            "0.1",
            "--backend",
            "anthropic",
            "spec-reviewer",
            env=anthropic_env(fake),
        )
        reqs = fake.requests
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(reqs) == 3
    assert "new mail during the run: answer from spec-writer" in r.stdout
    last = json.dumps(reqs[2]["messages"][-1]["content"])
    assert "New mail arrived during your run" in last and "LATE-NEWS" in last


def test_sync_helper_refuses_email_and_runs_interactively_in_a_pty(gp: Project) -> None:
    import pty
    import select
    import subprocess

    r = gp.run("run-role", "--with-email", "spec-writing-helper", env=GIT_ENV)
    assert r.returncode != 0 and "sync helper role: it never reads or sends mail" in r.stderr
    script(
        gp,
        "spec-writing-helper",
        [
            {"say": "What problem does search solve?"},
            {"say": "Who searches, and for what?"},
            {"say": "# Search\n\nUsers search specs by title."},
        ],
    )
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from workflow.cli.run import main; main()", "-i", "spec-writing-helper", "search"],
        cwd=gp.dir,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, **GIT_ENV},
        close_fds=True,
    )
    os.close(slave)
    out = b""

    def until(marker: bytes, timeout: float = 20) -> None:
        nonlocal out
        end = time.monotonic() + timeout
        while marker not in out and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
        assert marker in out, out.decode(errors="replace")

    until(b"What problem does search solve?")
    os.write(master, b"Finding specs fast\n")
    until(b"Who searches, and for what?")
    os.write(master, b"/done\n")
    until(b"now? [y/N]")
    os.write(master, b"y\n")
    until(b"sent review-request")
    proc.wait(timeout=20)
    os.close(master)
    assert proc.returncode == 0
    assert (gp.dir / "specs" / "proposed" / "search.md").read_text() == "# Search\n\nUsers search specs by title.\n"
    got = mail(gp, "review-request")
    assert [m[3] for m in got] and all(m[3] == ("specs/proposed/search.md",) for m in got)
    assert {b for b, *_ in got} == {
        "spec-reviewer-panel.claude",
        "spec-reviewer-panel.gpt-5",
        "spec-reviewer-panel.gemini",
    }


def test_scripts_run_role_sh_runs_it(gp: Project) -> None:
    from helpers.project import ROOT

    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = gp.run("--dry-run", "--with-email", "spec-reviewer", tool=str(ROOT / "scripts" / "run-role.sh"), env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    assert (
        "--- context (dry run" in r.stdout
        and "# Artifacts referenced" in r.stdout
        and "## specs/proposed/user-auth.md" in r.stdout
    )
    assert unread(gp, "spec-reviewer") == 1


def test_an_agent_finds_workflow_on_its_path_when_the_owners_path_lacks_it(gp: Project) -> None:
    """agentd under systemd, pipx, `uv tool`: the owner's PATH has no `workflow`; an agent CLI's
    shell that calls it by name (and shrugs at "command not found") must still reach it."""
    (gp.dir / "agent.sh").write_text(
        "cat >/dev/null\nworkflow-notify question 'specs/*/user-auth.md' spec-writer QUESTION=by-name\n"
        "workflow finish done 'asked by name'\n"
    )
    with open(gp.dir / "workflow.toml", "a") as f:
        f.write('\n[backends.command]\nargv = ["/bin/sh", "agent.sh"]\ntimeout = 30\n')
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = gp.run(
        "run-role", "--with-email", "--backend", "command", "spec-reviewer", env={**GIT_ENV, "PATH": "/usr/bin:/bin"}
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert mail(gp, "question") == [("spec-writer", "question", "proposed", ("specs/*/user-auth.md",))]


def test_an_agent_cli_is_told_the_commands_it_really_has_not_tools_it_lacks(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with open(gp.dir / "workflow.toml", "a") as f:
        f.write(
            '\n[backends.command]\nargv = ["/bin/sh", "-c", "cat > prompt.txt; workflow finish done read"]\ntimeout = 30\n'
        )
    r = gp.run("run-role", "--with-email", "--dry-run", "--backend", "scripted", "spec-reviewer", env=GIT_ENV)
    assert "Tools: read_artifact" in r.stdout  # an API agent is told its tools
    r = gp.run("run-role", "--with-email", "--backend", "command", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    prompt = (gp.dir / "prompt.txt").read_text()
    assert "`workflow-notify [--in-reply-to MESSAGE-ID] EVENT ARTIFACT TO" in prompt
    assert "workflow move ARTIFACT STATE --as spec-reviewer" in prompt
    assert "read_artifact" not in prompt and "send_message" not in prompt
    assert "`workflow finish done 'WHAT YOU DID'`" in prompt
