"""The CLI as users run it: seed 002's workflow-notify lines, inbox, thread, errors, help, demo."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from pathlib import Path

import pytest

from helpers.project import ROOT, Project
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.mail.message import parse

# Every workflow-notify.sh line in seed 002, as written there (each sent with the artifact in the
# folder its path names, as in the seed's story: the state-matches guardrail checks that).
SEED_EXAMPLES = [
    'review-request specs/proposed/user-auth.md spec-reviewer CONTEXT="Focus on error handling patterns"',
    'approval specs/todo/user-auth.md spec-writer NEXT_STATE="todo" NEXT_ROLES="skeleton-writer,test-writer"',
    '--in-reply-to "<20251114103000.spec-writer@workflow.local>" clarification-request specs/proposed/user-auth.md '
    'spec-writer QUESTION="Should OAuth tokens expire or use refresh pattern?" BLOCKING="no"',
    '--in-reply-to "<20251114110000.spec-reviewer@workflow.local>" answer specs/proposed/user-auth.md spec-reviewer '
    'CONTEXT="Use refresh token pattern per OAuth 2.0 spec. Will update spec to clarify."',
    'blocker-report specs/blocked/user-auth.md coordinator BLOCKING_DETAILS="External API library incompatible with '
    'specified interface" CONTEXT="Tried adapters, but async/sync mismatch prevents clean integration"',
    '--in-reply-to "<blocker-msg-id>" answer specs/blocked/user-auth.md implementer CONTEXT="Spec needs revision. Use '
    'async interfaces throughout. Will update spec." NEXT_ACTIONS="Wait for spec revision, then retry implementation"',
    "review-request specs/proposed/test.md spec-reviewer",
]


@pytest.mark.parametrize("via", ["workflow-notify", "scripts/workflow-notify.sh", "workflow-notify, server up"])
def test_every_seed_example_works_as_written(project: Project, via: str) -> None:
    """As written, with no extra step — also when the server is up (AUTH required: the human's
    owner credential is found and used without a word)."""
    tool = "workflow-notify" if via.startswith("workflow-notify") else str(ROOT / via)
    spec = project.dir / "specs" / "proposed" / "user-auth.md"
    blocker = ""
    (project.dir / "specs" / "proposed" / "test.md").write_text("# test\n")  # the design's last example names it
    with contextlib.ExitStack() as stack:
        if via.endswith("server up"):
            stack.enter_context(
                BackgroundServer(project.app.config, project.app.deliverer, port=project.app.config.smtp.port)
            )
        for line in SEED_EXAMPLES:
            state = re.search(r"specs/(\w+)/", line)
            if state and "user-auth" in line:
                spec = spec.rename(project.dir / "specs" / state.group(1) / "user-auth.md")
            if "<blocker-msg-id>" in line:  # the design's placeholder for the blocker-report's Message-ID
                line = line.replace("<blocker-msg-id>", blocker)
            r = project.run(*shlex.split(line), tool=tool)
            assert r.returncode == 0, (line, r.stderr)
            if line.startswith("blocker-report"):
                blocker = r.stdout.strip()
            assert ("(smtp: /" in r.stderr) == via.endswith("server up"), r.stderr
            mid = r.stdout.strip()
            assert re.match(r"^<\d{14}\.[0-9a-f]{12}\.user@workflow\.local>$", mid), r.stdout
    files = project.new_files()
    by_box: dict[str, list[bytes]] = {}
    for f in files:
        by_box.setdefault(f.parent.parent.name, []).append(f.read_bytes())
    assert sorted(by_box) == [
        "coordinator",
        "implementer",
        "platform-lead",  # the blocker-report about a blocked artifact is copied to whoever can answer it
        "skeleton-writer",
        "spec-reviewer",
        "spec-writer",
        "test-writer",
    ]
    approval = next(parse(b) for b in by_box["test-writer"])
    assert approval.event == "approval" and approval.state == "todo"
    assert approval.next_roles == ["skeleton-writer", "test-writer"]
    assert approval.recipients == [
        "spec-writer@workflow.local",
        "skeleton-writer@workflow.local",
        "test-writer@workflow.local",
    ]
    clar = next(p for p in map(parse, by_box["spec-writer"]) if p.event == "clarification-request")
    assert clar.in_reply_to == "<20251114103000.spec-writer@workflow.local>"
    assert clar.references == ["<20251114103000.spec-writer@workflow.local>"]
    assert clar.subject.startswith("Re: ")


def test_from_and_env_set_the_sender_and_replies_thread(project: Project) -> None:
    r1 = project.run(
        "review-request",
        "specs/proposed/user-auth.md",
        "spec-reviewer",
        tool="workflow-notify",
        env={"WORKFLOW_ROLE": "spec-writer"},
    )
    root = r1.stdout.strip()
    assert root.endswith(".spec-writer@workflow.local>")
    r2 = project.run(
        "--from",
        "spec-reviewer",
        "--in-reply-to",
        root,
        "clarification-request",
        "specs/*/user-auth.md",
        "spec-writer",
        "QUESTION=Which?",
        tool="workflow-notify",
    )
    r3 = project.run(
        "--from",
        "spec-writer",
        "--in-reply-to",
        r2.stdout.strip(),
        "answer",
        "specs/*/user-auth.md",
        "spec-reviewer",
        "CONTEXT=That one.",
        tool="workflow-notify",
    )
    assert r3.returncode == 0, r3.stderr
    [ans] = [
        parse(f.read_bytes())
        for f in project.new_files("spec-reviewer")
        if b"answer" in f.read_bytes().split(b"X-Event-Type: ")[1][:8]
    ]
    assert ans.references == [root, r2.stdout.strip()]
    assert ans.in_reply_to == r2.stdout.strip()
    assert ans.subject == "Re: [REVIEW REQUEST] user-auth ready for review"


def test_stdout_prints_without_sending(project: Project) -> None:
    r = project.run(
        "--stdout", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify"
    )
    assert r.returncode == 0
    assert "X-Event-Type: review-request" in r.stdout and "X-Workflow-State: proposed" in r.stdout
    assert project.new_files() == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["party", "specs/proposed/a.md", "spec-reviewer"], "unknown event type 'party'"),
        (
            ["question", "specs/proposed/a.md", "spec-reveiwer", "QUESTION=q"],
            "did you mean spec-reviewer@workflow.local",
        ),
        (
            ["--from", "ghost", "question", "specs/proposed/a.md", "spec-reviewer", "QUESTION=q"],
            "unknown sender role 'ghost'",
        ),
        (["approval", "specs/proposed/a.md", "spec-writer", "NEXT_STATE=limbo"], "NEXT_STATE 'limbo' is not a state"),
        (["question", "../../etc/passwd", "spec-reviewer", "QUESTION=q"], "contains '..'"),
        (["question", "/etc/passwd", "spec-reviewer", "QUESTION=q"], "absolute"),
        (["question", "specs/proposed/a.md", "spec-reviewer"], "needs QUESTION"),
        (["question", "specs/proposed/a.md", "spec-reviewer", "QUESTION=a\r\nBcc: evil@x"], "carriage return"),
        (["question", "specs/proposed/a.md", "spec-reviewer", "QUESTION=a\nb"], "line feed"),
        (["question", "specs/proposed/a.md", "spec-reviewer", "lower=x"], "upper case"),
        (
            ["--in-reply-to", "not an id", "answer", "specs/proposed/a.md", "spec-reviewer", "CONTEXT=x"],
            "is not a Message-ID",
        ),
        (
            ["--in-reply-to", "garbage", "answer", "specs/proposed/a.md", "spec-reviewer", "CONTEXT=x"],
            "'garbage' is not a Message-ID",
        ),
        (["question", "specs/proposed/a.md", "someone@gmail.com", "QUESTION=q"], "relaying denied"),
        (["question", "specs/proposed/a.md", "spec-writing-helper", "QUESTION=q"], "sync helper role"),
    ],
)
def test_bad_input_one_line_error_nothing_stored(project: Project, args: list[str], needle: str) -> None:
    r = project.run(*args, tool="workflow-notify")
    assert r.returncode != 0
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert project.new_files() == []


def test_broken_project_template_and_unwritable_mail_root(project: Project, tmp_path: Path) -> None:
    (project.dir / "email-templates").mkdir()
    (project.dir / "email-templates" / "question.txt").write_text("Subject: {{ oops(\n\nbody\n")
    r = project.run("question", "specs/proposed/a.md", "spec-reviewer", "QUESTION=q", tool="workflow-notify")
    assert r.returncode != 0 and "question.txt" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = project.run(
        "--mail-root",
        str(blocker / "mail"),
        "review-request",
        "specs/proposed/a.md",
        "spec-reviewer",
        tool="workflow-notify",
    )
    assert r.returncode != 0 and str(blocker) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert project.new_files() == []


def test_inbox_priorities_grouping_filters_and_reading_marks_nothing(project: Project) -> None:
    p = project
    p.send("coordinator", "status-update", "specs/doing/billing.md", "spec-reviewer", STATUS="halfway")
    p.send("user", "approval", "specs/todo/search.md", "spec-reviewer")
    rr = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    p.send("implementer", "blocker-report", "specs/blocked/billing.md", "spec-reviewer", BLOCKING_DETAILS="x")
    cl = p.send(
        "spec-reviewer", "clarification-request", "specs/proposed/user-auth.md", "spec-writer", rr, QUESTION="q"
    )
    p.send("spec-writer", "answer", "specs/proposed/user-auth.md", "spec-reviewer", cl, CONTEXT="a")
    before = sorted(str(f) for f in p.new_files())
    r = p.run("inbox", "spec-reviewer", "--json")
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["threads"]
    assert [[m["event"] for m in t["messages"]] for t in threads] == [
        ["blocker-report"],
        ["review-request", "answer"],
        ["approval"],
        ["status-update"],
    ]
    r = p.run("inbox", "spec-reviewer", "--artifact", "specs/*/user-auth.md", "--json")
    assert [m["event"] for t in json.loads(r.stdout)["threads"] for m in t["messages"]] == ["review-request", "answer"]
    r = p.run("inbox", "spec-reviewer", "--event", "blocker-report", "--state", "blocked")
    assert "1 unread message in 1 thread" in r.stdout and "blocker-report" in r.stdout
    r = p.run("inbox", "spec-reviewer")
    assert (
        r.stdout.index("blocker-report")
        < r.stdout.index("review-request")
        < r.stdout.index("approval")
        < r.stdout.index("status-update")
    )
    assert sorted(str(f) for f in p.new_files()) == before  # nothing was marked read


def test_thread_transcript_respects_visibility(project: Project) -> None:
    p = project
    rr = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="ctx-one")
    cl = p.send(
        "spec-reviewer",
        "clarification-request",
        "specs/proposed/user-auth.md",
        "spec-writer",
        rr,
        QUESTION="question-two",
    )
    p.send("spec-writer", "answer", "specs/proposed/user-auth.md", "spec-reviewer", cl, CONTEXT="answer-three")
    inner = p.send(
        "spec-reviewer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-reviewer-panel-internal",
        QUESTION="panel-secret",
    )
    r = p.run("thread", rr, "--as", "spec-writer")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("# Thread: [REVIEW REQUEST] user-auth ready for review")
    assert out.index("ctx-one") < out.index("question-two") < out.index("answer-three")
    assert "## NEW clarification-request from spec-reviewer" in out
    r = p.run("thread", inner, "--as", "spec-writer")
    assert r.returncode != 0 and "not in spec-writer's mailbox" in r.stderr
    r = p.run("thread", inner, "--as", "spec-reviewer-panel.gemini")
    assert r.returncode == 0 and "panel-secret" in r.stdout
    r = p.run("search", "panel-secret", "--as", "spec-writer")
    assert r.returncode == 0 and "panel" not in r.stdout


def test_roster_and_route(project: Project) -> None:
    r = project.run("roster")
    assert r.returncode == 0
    for needle in (
        "spec-reviewer-panel-internal@workflow.local",
        "spec-discussion@workflow.local",
        "spec-writing-helper",
        "sync",
    ):
        assert needle in r.stdout
    data = json.loads(project.run("roster", "--json").stdout)
    assert any(a["kind"] == "internal" for a in data["addresses"])
    r = project.run("route", "spec-reviewer-panel-internal", "--from", "spec-writer")
    assert r.returncode != 0 and "internal-members-only" in r.stderr and "internal" in r.stdout
    r = project.run("route", "spec-reviewer-panel-internal", "--from", "spec-reviewer-panel.claude")
    assert r.returncode == 0 and "allowed" in r.stdout
    r = project.run("route", "nobody@gmail.com")
    assert r.returncode != 0 and "relaying denied" in r.stderr


def test_every_command_has_help_with_an_example_and_is_in_the_readme(project: Project) -> None:
    import click
    from click.testing import CliRunner

    from workflow.cli.main import COMMANDS, cli

    readme = (ROOT / "README.md").read_text()  # its command table names every command
    names = sorted(COMMANDS)
    assert {"inbox", "thread", "search", "reindex", "roster", "route", "demo", "notify"} <= set(names)
    runner = CliRunner()  # in this process: click renders the same help; the scripts are run below

    def helps(*args: str) -> None:
        r = runner.invoke(cli, [*args, "--help"], env={"WORKFLOW_CONFIG": str(project.dir / "workflow.toml")})
        assert r.exit_code == 0 and "Example:" in r.output, (args, r.output, r.exception)

    for name in names:
        helps(name)
        assert f"workflow {name}" in readme, name
        group = cli.get_command(click.Context(cli), name)
        if isinstance(group, click.Group):
            for sub in group.commands:
                helps(name, sub)
    for tool, args in (("workflow", ("--help",)), ("workflow", ("inbox", "--help")), ("workflow-notify", ("--help",))):
        r = project.run(*args, tool=tool)
        assert r.returncode == 0 and "Example:" in r.stdout, (tool, args, r.stderr)
    assert "workflow-notify review-request" in readme


def test_demo_with_dir_keeps_its_project_there_and_says_nothing_on_stderr(tmp_path: Path, project: Project) -> None:
    # The story the demo tells is checked where a user reads it: docs/reading-mail.md's test.
    r = project.run("demo", "--dir", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr
    assert f"Scratch project: {tmp_path / 'demo'}" in r.stdout
    assert (tmp_path / "demo" / "specs" / "todo" / "user-auth.md").exists()
    for noise in ("InotifyEmitter", "Traceback", "problem(s)"):
        assert noise not in r.stderr, noise
    r = project.run("status")
    assert "1 artifact, 0 flagged" in r.stdout, r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["inbox", "user", "--event", "reveiw-request"],
            "unknown event type 'reveiw-request'; did you mean review-request?",
        ),
        (["inbox", "user", "--state", "doign"], "unknown state 'doign'; did you mean doing"),
        (["panel", "status", "nope"], "artifact nope not found"),
        (["panel", "status", "user-auht"], "did you mean user-auth?"),
        (["inbox", "spec-reveiwer"], "unknown role 'spec-reveiwer'; did you mean spec-reviewer"),
        (["agentd", "resume", "cordinator"], "unknown role 'cordinator'; did you mean coordinator"),
        (
            ["move", "user-auth", "todo", "--as", "spec-reveiwer"],
            "unknown role 'spec-reveiwer'; did you mean spec-reviewer",
        ),
        (["run-role", "--with-email", "implementr"], "unknown role 'implementr'; did you mean implementer"),
        (
            [
                "move",
                "user-auth",
                "todo",
                "--as",
                "spec-reviewer",
                "--notify",
                "spec-writer",
                "--in-reply-to",
                "garbage",
            ],
            "'garbage' is not a Message-ID",
        ),
    ],
)
def test_filters_and_role_names_are_checked_with_a_suggestion(project: Project, args: list[str], needle: str) -> None:
    r = project.run(*args)
    assert r.returncode != 0, r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert needle in line, line
    if "unknown role" in line:
        assert "@workflow.local" not in line  # a role name is expected: roles are suggested, not addresses


def test_a_decision_moved_with_notify_threads_under_the_review_request(project: Project) -> None:
    from helpers.git import GIT_ENV, sh

    (project.dir / ".gitignore").write_text("mail/\n")
    r = project.run("init", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    sh(project, "git", "add", "-A")
    sh(project, "git", "commit", "-q", "-m", "spec")
    r = project.run("review-request", "specs/proposed/user-auth.md", "spec-reviewer", tool="workflow-notify")
    request = r.stdout.strip()
    r = project.run(
        "move", "user-auth", "todo", "--as", "spec-reviewer", "--notify", "spec-writer", "--reason", "good", env=GIT_ENV
    )
    assert r.returncode == 0, r.stderr
    approval = next(parse(f.read_bytes()) for f in project.new_files("spec-writer"))
    assert approval.event == "approval" and approval.in_reply_to == request and request in approval.references


def test_json_everywhere_it_is_promised_and_read_marks_what_it_prints(project: Project) -> None:
    import json as json_mod

    mid = project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="look")
    for args in (
        ["doctor", "--json"],
        ["route", "spec-reviewer-panel-internal", "--from", "spec-writer", "--json"],
        ["reindex", "--json"],
        ["guardrails", "--json"],
        ["read", "--as", "spec-reviewer", "--unread", "--peek", "--json"],
    ):
        r = project.run(*args)
        data = json_mod.loads(r.stdout)
        assert data is not None, args
    r = project.run("route", "spec-reviewer-panel-internal", "--from", "spec-writer", "--json")
    assert r.returncode == 6 and json_mod.loads(r.stdout)["from"]["allowed"] is False
    r = project.run("read", "--as", "spec-reviewer", "--unread")
    assert r.returncode == 0 and "X-Event-Type: review-request" in r.stdout and "Subject: [REVIEW REQUEST]" in r.stdout
    assert "look" in r.stdout
    r = project.run("read", "--as", "spec-reviewer", "--unread")
    assert "spec-reviewer: no unread mail" in r.stdout  # the first read marked it read
    r = project.run("read", mid, "--as", "spec-reviewer")
    assert r.returncode == 0 and mid in r.stdout
    r = project.run("read", mid, "--as", "spec-writer")
    assert r.returncode == 5 and "is not in spec-writer's mailbox" in r.stderr


def _in_a_terminal(p: Project, *args: str) -> str:
    """Run a command on a pseudo-terminal (what a person sees) and return what it printed."""
    import os as os_mod
    import pty
    import subprocess as sp
    import sys as sys_mod

    leader, follower = pty.openpty()
    env = {k: v for k, v in os_mod.environ.items() if not k.startswith("WORKFLOW_") and k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="120")
    proc = sp.Popen([sys_mod.executable, "-m", "workflow", *args], cwd=p.dir, stdout=follower, stderr=follower, env=env)
    os_mod.close(follower)
    out = b""
    while True:
        try:
            chunk = os_mod.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=30)
    os_mod.close(leader)
    return out.decode(errors="replace")


def test_status_is_a_coloured_table_on_a_terminal_and_plain_when_piped(project: Project) -> None:
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    shown = _in_a_terminal(project, "status")
    assert "\x1b[" in shown and "specs/proposed/user-auth.md" in shown and "review-request from user" in shown
    assert "━" in shown or "─" in shown  # a table's rules
    piped = project.run("status")
    assert "\x1b[" not in piped.stdout and "specs/proposed/user-auth.md" in piped.stdout
    plain = project.run("status", env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain.stdout


def test_reindex_shows_its_progress_on_a_terminal_and_not_when_piped(project: Project) -> None:
    for i in range(3):
        project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT=f"c{i}")
    shown = _in_a_terminal(project, "reindex")
    assert "mailboxes" in shown and "indexed 3 messages" in shown, shown
    assert re.search(r"indexed \d+/\d+ mailboxes", shown), shown
    piped = project.run("reindex")
    assert "/" not in piped.stderr.replace(str(project.dir), "") and "indexed 3 messages" in piped.stdout


def test_inbox_and_doctor_are_coloured_on_a_terminal_and_plain_when_piped(project: Project) -> None:
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    shown = _in_a_terminal(project, "inbox", "spec-reviewer")
    assert "\x1b[" in shown and "review-request" in shown and "[REVIEW REQUEST]" in shown
    piped = project.run("inbox", "spec-reviewer")
    assert "\x1b[" not in piped.stdout and "review-request" in piped.stdout
    (project.dir / "specs" / "todo").mkdir(exist_ok=True)
    (project.dir / "specs" / "todo" / "user-auth.md").write_text("# a second copy\n")  # in two folders
    shown = _in_a_terminal(project, "doctor")
    assert "\x1b[" in shown and "user-auth" in shown
    assert "\x1b[" not in project.run("doctor").stdout
