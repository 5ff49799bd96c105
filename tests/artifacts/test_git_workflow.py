"""Artifacts in git: init, move, hooks, the server's state check, status and doctor — real git, real mail."""

from __future__ import annotations

import json
import os
import re
import smtplib
import subprocess
import sys
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project, mail, sh
from helpers.project import Project
from helpers.smtp import client, server_process
from workflow.delivery.server.smtpd import BackgroundServer


@pytest.fixture
def gp(tmp_path: Path) -> Project:
    return git_project(tmp_path / "gp")


def snapshot(d: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            path = Path(root) / f
            st = path.stat()
            out[str(path.relative_to(d))] = (st.st_mtime_ns, st.st_mode, path.read_bytes())
    return out


# ------------------------------------------------------------------ init


def test_init_scaffolds_every_root_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "fresh"
    p = Project(tmp_path, None)  # type: ignore[arg-type]
    r = p.run("init", str(d), "--root", "specs", "--root", "vision", "--root", "roadmap", "--templates")
    assert r.returncode == 0, r.stderr
    for root in ("specs", "vision", "roadmap"):
        for state in ("proposed", "todo", "doing", "blocked", "done"):
            assert (d / root / state / ".gitkeep").is_file()
    assert (d / "roles" / "README.md").is_file() and (d / "email-templates" / "approval.txt").is_file()
    assert (d / ".git").is_dir()
    for hook in ("pre-commit", "post-commit"):
        assert "workflow-mail hook" in (d / ".git" / "hooks" / hook).read_text()
        assert os.access(d / ".git" / "hooks" / hook, os.X_OK)
    assert 'artifact_roots = ["specs", "vision", "roadmap"]' in (d / "workflow.toml").read_text()
    before = snapshot(d)
    r = p.run("init", str(d), "--templates")
    assert r.returncode == 0, r.stderr
    assert "nothing changed" in r.stdout
    assert snapshot(d) == before


def test_init_keeps_an_existing_hook_and_runs_it_first(tmp_path: Path) -> None:
    d = tmp_path / "own"
    d.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    mine = d / ".git" / "hooks" / "pre-commit"
    mine.write_text("#!/bin/sh\necho my-own-hook-ran >&2\n")
    mine.chmod(0o755)
    p = Project(d, None)  # type: ignore[arg-type]
    r = p.run("init", str(d))
    assert r.returncode == 0, r.stderr
    assert "pre-commit.local" in r.stdout
    assert (d / ".git" / "hooks" / "pre-commit.local").read_text().startswith("#!/bin/sh\necho my-own")
    (d / "README").write_text("x")
    r = sh(p, "git", "add", "README")
    r = sh(p, "git", "commit", "-m", "first")
    assert "my-own-hook-ran" in r.stderr


# ------------------------------------------------------------------ move


def test_move_commits_once_with_role_transition_and_reason_and_notifies(gp: Project) -> None:
    (gp.dir / "unrelated.txt").write_text("staged, not part of the move")
    sh(gp, "git", "add", "unrelated.txt")
    r = gp.run(
        "move",
        "specs/*/user-auth.md",
        "todo",
        "--as",
        "spec-reviewer",
        "--reason",
        "Complete and testable",
        "--notify",
        "spec-writer",
        "--var",
        "NEXT_ROLES=skeleton-writer,test-writer",
        env=GIT_ENV,
    )
    assert r.returncode == 0, r.stderr
    assert (gp.dir / "specs" / "todo" / "user-auth.md").exists()
    assert not (gp.dir / "specs" / "proposed" / "user-auth.md").exists()
    log = sh(gp, "git", "log", "--format=%s%n%b", "-1").stdout
    assert log.startswith("spec-reviewer: approve user-auth (proposed → todo)\n")
    assert "Complete and testable" in log
    files = sh(gp, "git", "show", "--name-status", "--no-renames", "--format=", "HEAD").stdout.split()
    assert sorted(files) == ["A", "D", "specs/proposed/user-auth.md", "specs/todo/user-auth.md"]
    assert "A\tunrelated.txt" in sh(gp, "git", "status", "--porcelain").stdout.replace("A  ", "A\t")
    got = mail(gp)
    assert got == [
        (box, "approval", "todo", ("specs/todo/user-auth.md",))
        for box in ("skeleton-writer", "spec-writer", "test-writer")
    ]  # the approval only: the post-commit hook saw the Workflow-Notify trailer


def test_move_refusals_name_the_problem(gp: Project) -> None:
    def refused(*args: str) -> str:
        r = gp.run("move", *args, env=GIT_ENV)
        assert r.returncode != 0, r.stdout
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr

    assert "illegal transition proposed → done" in refused("user-auth", "done", "--as", "spec-reviewer")
    assert "legal from proposed/: proposed → todo" in refused("user-auth", "done", "--as", "spec-reviewer")
    assert "artifact ghost not found" in refused("ghost", "todo", "--as", "spec-reviewer")
    assert "unknown state 'limbo'" in refused("user-auth", "limbo", "--as", "spec-reviewer")
    assert "nobody" in refused("user-auth", "todo", "--as", "nobody")
    assert "test-writer may not move" in refused("user-auth", "todo", "--as", "test-writer")
    (gp.dir / "specs" / "proposed" / "user-auth.md").write_text("# edited, not committed\n")
    assert "has uncommitted changes" in refused("user-auth", "todo", "--as", "spec-reviewer")
    sh(gp, "git", "checkout", "--", "specs/proposed/user-auth.md")
    (gp.dir / "specs" / "proposed" / "new.md").write_text("# new\n")
    assert "is not committed" in refused("new", "todo", "--as", "spec-reviewer")
    (gp.dir / "specs" / "todo" / "user-auth.md").write_text("# a stray copy\n")
    assert "is in 2 state folders" in refused("user-auth", "todo", "--as", "spec-reviewer")
    assert sh(gp, "git", "rev-list", "--count", "HEAD").stdout.strip() == "1"  # nothing was committed
    assert mail(gp) == []


def test_rejection_stays_put_and_still_notifies(gp: Project) -> None:
    r = gp.run(
        "move",
        "user-auth",
        "proposed",
        "--as",
        "spec-reviewer",
        "--reason",
        "error cases missing",
        "--notify",
        "spec-writer",
        env=GIT_ENV,
    )
    assert r.returncode == 0, r.stderr
    assert "stays in proposed/" in r.stdout
    assert sh(gp, "git", "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert mail(gp) == [("spec-writer", "rejection", "proposed", ("specs/proposed/user-auth.md",))]
    # A template variable that is missing refuses before anything changes.
    r = gp.run(
        "move",
        "user-auth",
        "todo",
        "--as",
        "spec-reviewer",
        "--notify",
        "spec-writer",
        "--event",
        "question",
        env=GIT_ENV,
    )
    assert r.returncode != 0 and "QUESTION" in r.stderr
    assert (gp.dir / "specs" / "proposed" / "user-auth.md").exists()


# ------------------------------------------------------------------ hooks


def test_plain_git_mv_and_commit_notifies_once(gp: Project) -> None:
    sh(gp, "git", "mv", "specs/proposed/user-auth.md", "specs/todo/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "approve by hand")
    assert "sent status-update for specs/todo/user-auth.md (proposed → todo)" in r.stderr
    first = mail(gp)
    boxes = [b for b, *_ in first]
    # The roles that act on todo/ (they own todo -> doing), not every role whose globs match.
    assert sorted(boxes) == ["implementer", "skeleton-writer", "test-writer"], boxes
    assert "to " in r.stderr and all(b in r.stderr for b in boxes)  # says who was notified
    assert "user" not in boxes  # the sender (a human's commit: default_sender) is not told its own move
    assert all(m[1:] == ("status-update", "todo", ("specs/todo/user-auth.md",)) for m in first)
    assert len(boxes) == len(set(boxes))
    # Running the hook again, or amending the commit, sends nothing more.
    r = gp.run("hooks", "run", "post-commit")
    assert r.returncode == 0, r.stderr
    sh(gp, "git", "commit", "--amend", "-m", "approve by hand (amended)")
    assert mail(gp) == first
    # The next legal move is a new notification.
    sh(gp, "git", "mv", "specs/todo/user-auth.md", "specs/doing/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "start")
    assert len(mail(gp)) == len(first) + 1 and "to implementer" in r.stderr  # only it acts on doing/
    sh(gp, "git", "mv", "specs/doing/user-auth.md", "specs/done/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "finish")
    assert "no role acts on done/" in r.stderr and len(mail(gp)) == len(first) + 1


def test_pre_commit_refuses_illegal_moves_and_second_copies(gp: Project) -> None:
    sh(gp, "git", "mv", "specs/proposed/user-auth.md", "specs/done/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "skip ahead", check=False)
    assert r.returncode != 0
    assert "illegal transition proposed → done for specs/done/user-auth.md" in r.stderr
    assert "legal from proposed/: proposed → todo" in r.stderr
    sh(gp, "git", "mv", "specs/done/user-auth.md", "specs/proposed/user-auth.md")
    (gp.dir / "specs" / "todo" / "user-auth.md").write_text("# copy\n")
    sh(gp, "git", "add", "specs/todo/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "copy", check=False)
    assert r.returncode != 0 and "artifact specs/*/user-auth.md is in 2 state folders" in r.stderr
    assert sh(gp, "git", "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert mail(gp) == []


def _hook(p: Project, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``workflow hooks run ARGS`` as the installed hook runs it, and the modules it imported."""
    cfg = str(p.dir / "workflow.toml")
    r = sh(
        p,
        sys.executable,
        "-P",
        "-X",
        "importtime",
        "-m",
        "workflow",
        "--config",
        cfg,
        "hooks",
        "run",
        *args,
        check=False,
    )
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    r.stderr = "".join(line for line in r.stderr.splitlines(keepends=True) if not line.startswith("import time:"))
    return r, mods


def test_the_hooks_answer_the_commits_of_runs_and_moves_without_the_cli_or_the_app(gp: Project) -> None:
    def fast(hook: str) -> None:
        r, mods = _hook(gp, hook)
        assert r.returncode == 0 and r.stderr == "", (hook, r.stderr)
        assert not {"click", "workflow.app", "workflow.cli.main", "smtplib"} & mods, (hook, sorted(mods))

    r = gp.run("move", "user-auth", "todo", "--as", "spec-reviewer", "--notify", "implementer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    told = mail(gp)
    assert told  # the move told its people itself (its Workflow-Notify trailer): post-commit has nothing to do
    fast("pre-commit")
    fast("post-commit")
    assert mail(gp) == told
    # the same pre-commit refuses as the full command does, with its rule, still without click
    sh(gp, "git", "mv", "specs/todo/user-auth.md", "specs/done/user-auth.md")
    r, mods = _hook(gp, "pre-commit")
    assert r.returncode == 1 and "illegal transition todo → done" in r.stderr, r.stderr
    assert "commit refused" in r.stderr and "click" not in mods
    # a move nobody was told of yet is announced (by the full command), and only once
    sh(gp, "git", "mv", "specs/done/user-auth.md", "specs/doing/user-auth.md")
    r = sh(gp, "git", "commit", "-m", "start by hand")
    assert "sent status-update for specs/doing/user-auth.md" in r.stderr and len(mail(gp)) == len(told) + 1
    fast("post-commit")  # again: the ledger has it
    assert len(mail(gp)) == len(told) + 1


def test_custom_transition_graph(tmp_path: Path) -> None:
    p = git_project(
        tmp_path / "g", '[artifacts]\ntransitions = ["proposed -> done"]\ncommit_notify = ["coordinator"]\n'
    )
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer", env=GIT_ENV)
    assert r.returncode != 0 and "legal from proposed/: proposed → done" in r.stderr
    r = p.run("move", "user-auth", "done", "--as", "spec-reviewer", env=GIT_ENV)
    assert r.returncode != 0 and "spec-reviewer may not move specs/proposed/user-auth.md proposed → done" in r.stderr
    r = p.run("move", "user-auth", "done", "--as", "user", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    assert mail(p) == [("coordinator", "status-update", "done", ("specs/done/user-auth.md",))]


def test_hook_queues_mail_it_cannot_send_and_keeps_the_commit(gp: Project) -> None:
    from aiosmtpd.controller import UnixSocketController

    class Busy:
        async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
            return "451 4.3.0 try again later"

    sock = gp.app.config.state.socket  # where the owner's commands (the hook) find the server
    sock.parent.mkdir(parents=True, exist_ok=True)
    busy = UnixSocketController(Busy(), unix_socket=str(sock))
    busy.start()
    try:
        sh(gp, "git", "mv", "specs/proposed/user-auth.md", "specs/todo/user-auth.md")
        r = sh(gp, "git", "commit", "-m", "approve while mail is down")
    finally:
        busy.stop()
    assert "queued" in r.stderr
    assert (gp.dir / "specs" / "todo" / "user-auth.md").exists()
    assert sh(gp, "git", "rev-list", "--count", "HEAD").stdout.strip() == "2"
    assert mail(gp) == []
    r = gp.run("doctor")
    assert r.returncode != 0 and "outbox: 1 notification(s) queued" in r.stdout
    # The next commit (nothing listens now: direct delivery) sends what was queued, once.
    (gp.dir / "notes.txt").write_text("x")
    sh(gp, "git", "add", "notes.txt")
    r = sh(gp, "git", "commit", "-m", "unrelated")
    assert "sent queued status-update" in r.stderr
    sent = mail(gp)
    assert sent and all(m[1:3] == ("status-update", "todo") for m in sent)
    sh(gp, "git", "commit", "--allow-empty", "-m", "again")
    assert mail(gp) == sent


def test_hooks_work_for_a_project_in_a_subdirectory(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    top.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=top, check=True)
    p = git_project(top / "services" / "auth")
    sh(p, "git", "mv", "specs/proposed/user-auth.md", "specs/todo/user-auth.md")
    r = sh(p, "git", "commit", "-m", "approve")
    assert "sent status-update for specs/todo/user-auth.md" in r.stderr, r.stderr
    assert "services/auth/workflow.toml" in (top / ".git" / "hooks" / "pre-commit").read_text()


# ------------------------------------------------------------------ the server's state check


def test_server_refuses_a_wrong_state_claim_and_accepts_it_after_the_move(gp: Project) -> None:
    def approval() -> bytes:
        r = gp.run(
            "--from",
            "spec-reviewer",
            "--stdout",
            "approval",
            "specs/*/user-auth.md",
            "spec-writer",
            "NEXT_STATE=todo",
            tool="workflow-notify",
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.replace("\n", "\r\n").encode()

    cfg = gp.app.config
    with BackgroundServer(cfg, gp.app.deliverer) as port:
        with client(port) as s:
            with pytest.raises(smtplib.SMTPDataError) as e:
                s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], approval())
        assert e.value.smtp_code == 550
        text = e.value.smtp_error.decode()
        assert text.startswith(
            "5.7.1 state-matches: artifact specs/*/user-auth.md is in proposed/, message claims todo"
        )
        r = gp.run("move", "user-auth", "todo", "--as", "spec-reviewer", env=GIT_ENV)
        assert r.returncode == 0, r.stderr
        with client(port) as s:
            s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], approval())
            with pytest.raises(
                smtplib.SMTPDataError,
                match="review-request names specs/proposed/user-auth.md, but the artifact is now specs/todo/user-auth.md",
            ):
                raw = gp.run(
                    "--from",
                    "spec-writer",
                    "--stdout",
                    "review-request",
                    "specs/proposed/user-auth.md",
                    "spec-reviewer",
                    tool="workflow-notify",
                ).stdout
                s.sendmail(
                    "spec-writer@workflow.local", ["spec-reviewer@workflow.local"], raw.replace("\n", "\r\n").encode()
                )
    assert [m for m in mail(gp) if m[1] == "approval"] == [
        ("spec-writer", "approval", "todo", ("specs/*/user-auth.md",))
    ]


# ------------------------------------------------------------------ status and doctor


def test_status_board_shows_last_mail_and_flags_a_disagreeing_claim(tmp_path: Path) -> None:
    # The guardrail is off here, as for mail from before it existed: the board still flags the claim.
    gp = git_project(tmp_path / "board", "[guardrails]\nstate_matches = false\n")
    (gp.dir / "specs" / "doing" / "billing.md").write_text("# billing\n")
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    gp.send("implementer", "status-update", "specs/*/billing.md", "coordinator", STATUS="halfway")
    gp.send("spec-reviewer", "approval", "specs/todo/billing.md", "implementer", NEXT_STATE="todo")
    r = gp.run("status", "--json")
    assert r.returncode == 0, r.stderr
    board = json.loads(r.stdout)["states"]
    assert [c["path"] for c in board["proposed"]] == ["specs/proposed/user-auth.md"]
    assert board["proposed"][0]["last"]["event"] == "review-request" and board["proposed"][0]["flags"] == []
    assert board["doing"][0]["last"]["from"] == "spec-reviewer@workflow.local"
    assert board["doing"][0]["messages"] == 2 and board["doing"][0]["flags"] == ["mail claims todo"]
    text = gp.run("status").stdout
    assert "proposed/ (1)" in text and "review-request from spec-writer" in text and "done/ (0)" in text
    assert re.search(r"specs/doing/billing\.md +approval from spec-reviewer, \d+s ago  ! mail claims todo", text), text
    r = gp.run("status", "billing")
    assert r.returncode == 0 and "status-update" in r.stdout and "approval" in r.stdout and "[todo]" in r.stdout


def planted(tmp_path: Path) -> Project:
    """A project with one of each problem doctor looks for."""
    p = git_project(tmp_path / "sick", "[guardrails]\nstate_matches = false\n")
    p.send("spec-reviewer", "approval", "specs/todo/user-auth.md", "spec-writer", NEXT_STATE="todo")  # git: proposed
    p.send("spec-writer", "review-request", "specs/proposed/ghost.md", "spec-reviewer")  # no such artifact
    (p.dir / "specs" / "proposed" / "billing.md").write_text("# billing\n")
    (p.dir / "specs" / "doing" / "billing.md").write_text("# billing, a second copy\n")
    with p.app.index() as index:
        index.refresh()
    stray = next(iter(p.new_files("spec-writer")))
    stray.rename(stray.parent.parent / "cur" / (stray.name + ":2,S"))
    os.utime(stray.parent, ns=(0, 0))  # hide the change from the mtime check: only a full comparison sees it
    os.utime(stray.parent.parent / "cur", ns=(0, 0))
    with p.app.index() as index:
        index.db.execute("UPDATE dirstate SET new_mtime=0, cur_mtime=0")
    locks = p.mail / ".workflow" / "locks"
    locks.mkdir(parents=True)
    (locks / "spec-writer.lock").write_text(json.dumps({"pid": 999999, "host": os.uname().nodename, "started": 0}))
    (p.dir / ".git" / "hooks" / "post-commit").unlink()
    return p


def test_doctor_finds_each_planted_problem_and_fixes_the_safe_ones(tmp_path: Path) -> None:
    p = planted(tmp_path)
    r = p.run("doctor")
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    checks = sorted({ln.split(":")[0] for ln in lines})
    # modes: the mail root was made here, in the test's process, without the owner-only umask of a command
    # trust: the hooks were removed since `workflow init` approved them
    checks.remove("trust")
    assert checks == ["claim", "hooks", "index-drift", "missing-artifact", "modes", "stale-lock", "two-folders"], lines
    text = r.stdout
    assert (
        "artifact specs/*/billing.md is in 2 state folders (specs/doing/, specs/proposed/)" in text
        or "artifact specs/*/billing.md is in 2 state folders (specs/proposed/, specs/doing/)" in text
    )
    assert "claims todo; git has it in proposed/" in text
    assert "name specs/proposed/ghost.md, which is in no state folder now" in text
    assert "mailbox spec-writer: 1 copies moved or re-flagged" in text
    assert "process 999999 is gone" in text
    assert "post-commit not installed" in text
    r = p.run("doctor", "--fix")
    assert r.returncode == 1  # two-folders, claim and missing-artifact need a human
    assert "fixed index-drift" in r.stdout and "fixed stale-lock" in r.stdout and "fixed hooks" in r.stdout
    assert "fixed modes" in r.stdout
    left = sorted({ln.split(":")[0] for ln in r.stdout.splitlines() if not ln.startswith("fixed")})
    assert left == ["claim", "missing-artifact", "two-folders"], r.stdout
    assert not (p.mail / ".workflow" / "locks" / "spec-writer.lock").exists()


def test_doctor_is_quiet_on_a_healthy_project(gp: Project) -> None:
    r = gp.run("move", "user-auth", "todo", "--as", "spec-reviewer", "--notify", "spec-writer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    r = gp.run("doctor")
    assert r.returncode == 0, r.stdout
    assert r.stdout.strip() == "no problems found"


def test_locate_finds_an_artifact_wherever_it_is_now(gp: Project, project_factory: Callable[..., Project]) -> None:
    from workflow.core.locate import locate

    cfg = gp.app.config
    assert [a.path for a in locate("specs/*/user-auth.md", cfg)] == ["specs/proposed/user-auth.md"]
    assert [a.path for a in locate("specs/todo/user-auth.md", cfg)] == ["specs/proposed/user-auth.md"]
    assert [a.path for a in locate("./specs/*/user-*.md", cfg)] == ["specs/proposed/user-auth.md"]
    assert locate("specs/../etc/passwd", cfg) == [] and locate("README.md", cfg) == []


def test_inbox_follows_a_moved_artifact(gp: Project) -> None:
    gp.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = gp.run("move", "user-auth", "todo", "--as", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    r = gp.run("inbox", "spec-reviewer", "--artifact", "specs/todo/user-auth.md")
    assert r.returncode == 0, r.stderr
    assert "specs/proposed/user-auth.md (proposed) → now specs/todo/user-auth.md" in r.stdout
    r = gp.run("inbox", "spec-reviewer", "--artifact", "specs/todo/billing.md", "--json")
    assert json.loads(r.stdout)["threads"] == []
    r = gp.run("inbox", "spec-reviewer", "--json")
    msg = json.loads(r.stdout)["threads"][0]["messages"][0]
    assert msg["artifacts_now"] == {"specs/proposed/user-auth.md": ["specs/todo/user-auth.md"]}


def test_example_3_as_written_and_each_role_does_its_own_part(gp: Project) -> None:
    """docs/roles-and-panels.md's Examples: the skeleton-writer starts work (todo -> doing); the
    implementer blocks; its blocker-report reaches the platform-lead, whose answer in the thread
    is accepted as the design writes it."""
    r = gp.run("move", "user-auth", "todo", "--as", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    r = gp.run("move", "user-auth", "doing", "--as", "skeleton-writer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    sh(gp, "git", "mv", "specs/doing/user-auth.md", "specs/blocked/user-auth.md")
    sh(gp, "git", "commit", "-m", "implementer: blocked", "--trailer", "Workflow-Role: implementer")
    r = gp.run(
        "--from",
        "implementer",
        "blocker-report",
        "specs/blocked/user-auth.md",
        "coordinator",
        "BLOCKING_DETAILS=External API library incompatible with specified interface",
        tool="workflow-notify",
    )
    assert r.returncode == 0, r.stderr
    blocker = r.stdout.strip()
    r = gp.run(
        "--from",
        "platform-lead",
        "--in-reply-to",
        blocker,
        "answer",
        "specs/blocked/user-auth.md",
        "implementer",
        "CONTEXT=Spec needs revision. Use async interfaces throughout.",
        "NEXT_ACTIONS=Wait for spec revision, then retry implementation",
        tool="workflow-notify",
    )
    assert r.returncode == 0, r.stderr
    answers = [m for m in mail(gp, "answer") if m[0] == "implementer"]
    assert len(answers) == 1
    r = gp.run("move", "user-auth", "doing", "--as", "coordinator", env=GIT_ENV)
    assert r.returncode == 0, r.stderr


def test_a_claim_true_when_written_is_delivered_after_another_role_moved_the_artifact_on(gp: Project) -> None:
    # CI: test-reviewer's run moved rate-limit-tests to todo and wrote its approval (claiming todo);
    # the implementer started it (todo → doing) before that run committed and sent its mail, and the
    # server refused the approval and the status-update: the author never heard of the approval.
    # A claim is judged at the message's Date: true then, and moved on since by a committed move.
    # (seen again: the implementer started it and finished it before the reviewer's run committed)
    for state, role in (("todo", "spec-reviewer"), ("doing", "implementer"), ("done", "implementer")):
        r = gp.run("move", "user-auth", state, "--as", role, env=GIT_ENV)
        assert r.returncode == 0, r.stderr
    into_todo, into_doing, _ = (int(t) for t in reversed(sh(gp, "git", "log", "-3", "--format=%ct").stdout.split()))
    r = gp.run("--from", "spec-reviewer", "--stdout", "approval", "specs/*/user-auth.md", "spec-writer",
               "NEXT_STATE=todo", tool="workflow-notify")  # fmt: skip
    assert r.returncode == 0, r.stderr

    def written(at: int, n: int) -> bytes:
        raw = re.sub(r"(?m)^Date: .*$", f"Date: {formatdate(at)}", r.stdout)
        raw = re.sub(r"(?m)^Message-ID: <", f"Message-ID: <{n}.", raw)
        return raw.replace("\n", "\r\n").encode()

    with server_process(gp.dir) as (_, port), client(port) as s:
        for n, at, was in ((1, into_todo - 1, "proposed"), (2, into_doing + 1, "doing")):
            with pytest.raises(smtplib.SMTPDataError) as e:  # written while it was elsewhere: refused
                s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], written(at, n))
            assert "state-matches: artifact specs/*/user-auth.md is in done/, message claims todo" in str(e.value), was
        twice = written(into_todo, 4).replace(b"Date: ", b"Date: Thu, 01 Jan 2026 00:00:00 +0000\r\nDate: ", 1)
        with pytest.raises(smtplib.SMTPDataError):  # two Dates: a reader may take either for the one
            s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], twice)
        s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], written(into_todo, 3))
    assert [m for m in mail(gp) if m[1] == "approval"] == [
        ("spec-writer", "approval", "todo", ("specs/*/user-auth.md",))
    ]


def test_only_the_senders_own_move_by_our_code_makes_a_past_claim_true(gp: Project) -> None:
    # A hostile review: a Workflow-Transition trailer is anyone's to write and an amend resets a
    # commit's time; a claim another role's move made true is not the sender's to repeat.
    for state, role in (("todo", "spec-reviewer"), ("doing", "implementer")):
        r = gp.run("move", "user-auth", state, "--as", role, env=GIT_ENV)
        assert r.returncode == 0, r.stderr
    into_todo = int(sh(gp, "git", "log", "-2", "--format=%ct").stdout.split()[1])

    def send(sender: str, claim: str, at: int) -> None:
        r = gp.run("--from", sender, "--stdout", "status-update", "specs/*/user-auth.md", "spec-writer",
                   f"CONTEXT=claims {claim}", tool="workflow-notify")  # fmt: skip
        assert r.returncode == 0, r.stderr
        raw = re.sub(r"(?m)^X-Workflow-State: .*$", f"X-Workflow-State: {claim}", r.stdout)
        raw = re.sub(r"(?m)^Date: .*$", f"Date: {formatdate(at)}", raw)
        s.sendmail(f"{sender}@workflow.local", ["spec-writer@workflow.local"], raw.replace("\n", "\r\n").encode())

    with server_process(gp.dir) as (_, port), client(port) as s:
        with pytest.raises(smtplib.SMTPDataError, match="message claims todo"):  # the reviewer's move, not the writer's
            send("spec-writer", "todo", into_todo)
        send("spec-reviewer", "todo", into_todo)  # the reviewer's own: it stands
        later = f"GIT_COMMITTER_DATE=@{into_todo + 600} +0000"  # the move to doing, made anew, later: not ours
        sh(gp, "env", later, "git", "commit", "-q", "--amend", "--no-edit")
        with pytest.raises(smtplib.SMTPDataError, match="message claims todo"):
            send("spec-reviewer", "todo", into_todo)
        forged = (
            "Workflow-Role: spec-reviewer\nWorkflow-Transition: specs/done/user-auth.md -> specs/doing/user-auth.md"
        )
        sh(gp, "git", "commit", "-q", "--allow-empty", "-m", "notes", "-m", forged)
        with pytest.raises(smtplib.SMTPDataError, match="message claims done"):  # never in done/: a trailer's word
            send("spec-reviewer", "done", into_todo)
