"""A run's artifact writes are part of its transaction, and git is one queue for every run.

Real run-role processes over a real git repository: a run that writes and succeeds leaves exactly
its commit, authored as its role; a run that writes and fails leaves no commit and no change;
a move in a run carries what the run wrote. Moves started at the same instant from two threads
(the path a run's move_artifact takes) queue on the project's git lock instead of failing on
git's index.lock, and each reports its own commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from helpers.agentd import default_sigint, wait_until
from helpers.git import GIT_ENV, git_project, sh
from helpers.hostile import agent_project
from helpers.project import Project
from helpers.runs import run_command_role, script, unread
from helpers.sandboxing import needs_bwrap
from workflow.agents.tools import RoleTools
from workflow.artifacts.move import MoveRequest, MoveResult, move
from workflow.delivery.transport import make_transport


@pytest.fixture
def gp(tmp_path: Path) -> Project:
    p = git_project(tmp_path / "ed")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p


def head(p: Project) -> str:
    return sh(p, "git", "rev-parse", "HEAD").stdout.strip()


def status(p: Project) -> str:
    return sh(p, "git", "status", "--porcelain", "-uall", "--", "specs").stdout


def log(p: Project, since: str) -> list[str]:
    """(author, subject) lines of the commits after ``since``, oldest first."""
    return sh(p, "git", "log", "--reverse", "--format=%an|%s", f"{since}..HEAD").stdout.splitlines()


WRITE = {"tool": "write_artifact", "path": "specs/proposed/notes.md", "content": "# Notes\n\nfrom the run\n"}
EDIT = {"tool": "write_artifact", "path": "specs/proposed/user-auth.md", "content": "# User auth\n\nrevised\n"}


def test_a_run_that_writes_then_fails_leaves_no_commit_and_no_change(gp: Project) -> None:
    before, tree = head(gp), status(gp)
    script(gp, "spec-reviewer", [WRITE, EDIT, {"fail": "the agent crashed"}])
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1, r.stdout + r.stderr
    assert head(gp) == before and status(gp) == tree
    assert not (gp.dir / "specs" / "proposed" / "notes.md").exists()
    assert (gp.dir / "specs" / "proposed" / "user-auth.md").read_text() == "# User auth\n"
    assert "removed specs/proposed/notes.md" in r.stdout and "put specs/proposed/user-auth.md back" in r.stdout
    assert unread(gp, "spec-reviewer") == 1


def test_a_run_that_writes_and_succeeds_leaves_exactly_its_commit_authored_as_its_role(gp: Project) -> None:
    (gp.dir / "specs" / "proposed" / "owner-draft.md").write_text("the owner's, uncommitted\n")
    before = head(gp)
    script(gp, "spec-reviewer", [WRITE, EDIT, {"say": "done"}])
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert log(gp, before) == ["spec-reviewer|spec-reviewer: edit notes.md, user-auth.md"]
    files = sh(gp, "git", "show", "--name-only", "--format=", "HEAD").stdout.split()
    assert files == ["specs/proposed/notes.md", "specs/proposed/user-auth.md"]
    email = sh(gp, "git", "log", "-1", "--format=%ae").stdout.strip()
    assert email == "spec-reviewer@workflow.local"
    assert status(gp) == "?? specs/proposed/owner-draft.md\n"  # the owner's own work is not the run's
    assert "committed specs/proposed/notes.md, specs/proposed/user-auth.md as spec-reviewer" in r.stdout


def test_a_move_in_a_run_carries_what_the_run_wrote(gp: Project) -> None:
    before = head(gp)
    script(
        gp,
        "spec-reviewer",
        [EDIT, {"tool": "move_artifact", "artifact": "user-auth", "state": "todo", "reason": "revised and done"}],
    )
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [line.split("|")[0] for line in log(gp, before)] == ["spec-reviewer"]  # one commit: the move, with the edit
    assert sh(gp, "git", "show", "HEAD:specs/todo/user-auth.md").stdout == "# User auth\n\nrevised\n"
    assert status(gp) == ""


def test_a_failed_run_that_wrote_and_moved_is_put_back_entirely(gp: Project) -> None:
    before = head(gp)
    script(
        gp,
        "spec-reviewer",
        [
            WRITE,
            {"tool": "move_artifact", "artifact": "notes", "state": "todo", "reason": "new and approved"},
            EDIT,
            {"fail": "crashed"},
        ],
    )
    r = gp.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1, r.stdout
    assert (
        sh(gp, "git", "diff", "--stat", before, "HEAD").stdout == ""
    )  # history says what happened; the tree is as before
    assert status(gp) == ""
    assert not list(gp.dir.glob("specs/*/notes.md"))
    assert (gp.dir / "specs" / "proposed" / "user-auth.md").read_text() == "# User auth\n"


def test_a_failed_runs_move_that_someone_moved_on_is_left_alone_not_put_in_two_folders(gp: Project) -> None:
    script(
        gp,
        "spec-reviewer",
        [
            {"tool": "move_artifact", "artifact": "user-auth", "state": "todo", "reason": "ok"},
            {"sleep": 30},
            {"fail": "crashed"},
        ],
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    run = subprocess.Popen(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "spec-reviewer"],
        cwd=gp.dir,
        env={**env, **GIT_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,  # Ctrl-C reaches it even when this suite runs in the background
    )
    try:
        wait_until(lambda: (gp.dir / "specs" / "todo" / "user-auth.md").exists(), "the run's move")
        r = gp.run("move", "user-auth", "doing", "--as", "implementer", env=GIT_ENV)
        assert r.returncode == 0, r.stderr
    finally:
        run.send_signal(signal.SIGINT)  # the run fails: rolled back
        out, _ = run.communicate(timeout=60)
    assert "left specs/todo/user-auth.md alone" in out, out
    tracked = sh(gp, "git", "ls-files", "specs").stdout.split()
    assert [t for t in tracked if t.endswith("user-auth.md")] == ["specs/doing/user-auth.md"]
    assert status(gp) == ""


def test_a_project_in_a_subdirectory_of_its_repository_commits_and_puts_back_a_runs_writes(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=top, check=True)
    p = git_project(top / "proj")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    (p.dir / "specs" / "proposed" / "owner.md").write_text("the owner's draft\n")
    before = head(p)
    script(p, "spec-reviewer", [WRITE, {"fail": "crashed"}])
    r = p.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1 and head(p) == before, r.stdout
    assert not (p.dir / "specs" / "proposed" / "notes.md").exists()
    script(p, "spec-reviewer", [WRITE, {"say": "ok"}])
    r = p.run("run-role", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stdout
    assert log(p, before) == ["spec-reviewer|spec-reviewer: edit notes.md"]
    assert sh(p, "git", "show", "--name-only", "--format=", "HEAD").stdout.split() == ["proj/specs/proposed/notes.md"]
    assert (p.dir / "specs" / "proposed" / "owner.md").read_text() == "the owner's draft\n"


SHELL_AGENT = """
import os, subprocess, sys
sys.stdin.read()
open("specs/proposed/user-auth.md", "a").write("edited by the agent's shell\\n")
open("specs/proposed/shell.md", "w").write("# new\\n")
open("specs/proposed/odd\\nname.md", "w").write("# a newline in its name\\n")
subprocess.run([sys.executable, "-m", "workflow", "finish", "done", "edited"], check=True)
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_a_shell_agents_edits_are_committed_on_success_and_put_back_on_failure(gp: Project, code: int) -> None:
    (gp.dir / "agent.py").write_text(textwrap.dedent(SHELL_AGENT))
    with open(gp.dir / "workflow.toml", "a") as f:
        f.write(
            f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n[runs]\nenv = ["AGENT_EXIT"]\n'
        )
    sh(gp, "git", "add", "agent.py", "workflow.toml")
    sh(gp, "git", "commit", "-qm", "agent")
    before = head(gp)
    r = gp.run(
        "run-role", "--with-email", "--backend", "command", "spec-reviewer", env={**GIT_ENV, "AGENT_EXIT": str(code)}
    )
    assert r.returncode == (0 if code == 0 else 1), r.stdout + r.stderr
    assert status(gp) == ""
    if code == 0:
        assert log(gp, before) == ["spec-reviewer|spec-reviewer: edit odd\\nname.md, shell.md, user-auth.md"]
    else:
        assert head(gp) == before
        assert not (gp.dir / "specs" / "proposed" / "shell.md").exists()
        assert not (gp.dir / "specs" / "proposed" / "odd\nname.md").exists()
        # a shell's edits cannot be told from a person's made meanwhile: what the rollback discarded is kept
        kept = "refs/workflow/discarded/spec-reviewer"
        assert sh(gp, "git", "show", f"{kept}:specs/proposed/shell.md").stdout == "# new\n"
        assert "edited by the agent's shell" in sh(gp, "git", "show", f"{kept}:specs/proposed/user-auth.md").stdout
        assert f"in {kept}" in r.stdout


def together(*calls: object) -> list[MoveResult | BaseException]:
    """Run the calls in threads released at the same instant; their results (or errors) in order."""
    gate = threading.Barrier(len(calls))
    out: list[MoveResult | BaseException | None] = [None] * len(calls)

    def one(i: int, fn: object) -> None:
        gate.wait()
        try:
            out[i] = fn()  # type: ignore[operator]
        except BaseException as e:
            out[i] = e

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return [o for o in out if o is not None]


def test_two_runs_moving_different_artifacts_at_the_same_moment_both_succeed(tmp_path: Path) -> None:
    p = git_project(tmp_path / "race")
    for hook in ("pre-commit", "post-commit"):  # fast commits: the tightest race on git's index.lock
        (p.dir / ".git" / "hooks" / hook).unlink()
    transport = make_transport(p.app.config, p.app.deliverer, "direct")
    for i in range(20):
        for name in (f"a{i}", f"b{i}"):
            (p.dir / "specs" / "proposed" / f"{name}.md").write_text(f"# {name}\n")
        sh(p, "git", "add", "-A")
        sh(p, "git", "commit", "-qm", f"round {i}")
        results = together(
            lambda i=i: move(p.app, MoveRequest(f"a{i}", "todo", "spec-reviewer"), transport),
            lambda i=i: move(p.app, MoveRequest(f"b{i}", "todo", "skeleton-reviewer"), transport),
        )
        assert all(isinstance(r, MoveResult) and r.commit for r in results), (i, results)
        # each reports the commit it made: that commit moved its artifact, authored as its role
        for r, role in zip(results, ("spec-reviewer", "skeleton-reviewer"), strict=True):
            assert isinstance(r, MoveResult) and r.commit
            changed = sh(p, "git", "show", "--no-renames", "--name-only", "--format=%an", r.commit).stdout.split()
            assert changed == [role, r.after.path, r.before.path] or changed == [role, r.before.path, r.after.path]
    assert sorted(x.name for x in (p.dir / "specs" / "todo").glob("*.md")) == sorted(
        [f"a{i}.md" for i in range(20)] + [f"b{i}.md" for i in range(20)]
    )
    assert status(p) == ""


def test_two_runs_moving_the_same_artifact_one_moves_it_the_other_is_told_where_it_is(tmp_path: Path) -> None:
    p = git_project(tmp_path / "same")
    transport = make_transport(p.app.config, p.app.deliverer, "direct")
    roles = ("spec-reviewer", "skeleton-reviewer")
    tools = [RoleTools(p.app, p.app.roster.roles[r], transport) for r in roles]
    for i in range(5):
        name = f"s{i}"
        (p.dir / "specs" / "proposed" / f"{name}.md").write_text(f"# {name}\n")
        sh(p, "git", "add", "-A")
        sh(p, "git", "commit", "-qm", f"round {i}")
        said = together(*[lambda t=t, name=name: t.tool_move_artifact(name, "todo") for t in tools])
        assert all(isinstance(s, str) for s in said), said
        moved = [s for s in said if isinstance(s, str) and s.startswith("moved ")]
        told = [s for s in said if isinstance(s, str) and not s.startswith("moved ")]
        assert len(moved) == 1 and told == [f"specs/todo/{name}.md is already in todo/ (nothing to move)"], said
        assert len(sh(p, "git", "log", "--format=%H", "--", f"specs/todo/{name}.md").stdout.split()) == 1


def test_a_move_refused_because_the_artifact_was_moved_says_where_it_is_not_that_it_is_uncommitted(
    tmp_path: Path,
) -> None:
    p = git_project(tmp_path / "where")
    transport = make_transport(p.app.config, p.app.deliverer, "direct")
    move(p.app, MoveRequest("user-auth", "todo", "spec-reviewer"), transport)
    r = p.run("move", "specs/proposed/user-auth.md", "done", "--as", "implementer", env=GIT_ENV)
    assert r.returncode != 0
    assert "not committed" not in r.stderr and "specs/todo/user-auth.md" in r.stderr, r.stderr
    (p.dir / "specs" / "todo" / "new.md").write_text("# new\n")
    r = p.run("move", "new", "doing", "--as", "implementer", env=GIT_ENV)
    assert r.returncode != 0 and "specs/todo/new.md is not committed" in r.stderr


def test_a_git_lock_held_by_the_hook_of_a_move_does_not_deadlock(tmp_path: Path) -> None:
    """The post-commit hook takes the project lock; under a move that holds it, it must not wait."""
    p = git_project(tmp_path / "hook")
    done = subprocess.run(
        [sys.executable, "-m", "workflow", "move", "user-auth", "todo", "--as", "spec-reviewer"],
        cwd=p.dir,
        env={**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (p.dir / "specs" / "todo" / "user-auth.md").exists()


BIG_AGENT = """
import os, subprocess, sys
sys.stdin.read()
with open("specs/proposed/big.bin", "wb") as f:
    f.write(os.urandom(3 << 20))
open("specs/proposed/small.md", "w").write("# small\\n")
subprocess.run([sys.executable, "-m", "workflow", "finish", "failed", "gave up"], check=True)
"""


def objects_bytes(p: Project) -> int:
    return sum(f.stat().st_size for f in (p.dir / ".git" / "objects").rglob("*") if f.is_file())


def test_what_a_failed_run_discards_is_kept_only_up_to_its_cap(gp: Project) -> None:
    """Found by a hostile tester: a failed run's 300 MB file grew .git from 1 MB to 287 MB, kept
    alive by refs/workflow/discarded/ROLE, and every failed run could do it again."""
    (gp.dir / "agent.py").write_text(textwrap.dedent(BIG_AGENT))
    with open(gp.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    sh(gp, "git", "add", "agent.py", "workflow.toml")
    sh(gp, "git", "commit", "-qm", "agent")
    before = objects_bytes(gp)
    r = gp.run("run-role", "--with-email", "--backend", "command", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 1 and "finished its run as failed: gave up" in r.stdout, r.stdout + r.stderr
    assert not (gp.dir / "specs" / "proposed" / "big.bin").exists()
    assert objects_bytes(gp) - before < 1 << 20  # the 3 MiB are not in the owner's object store
    assert f"dropped specs/proposed/big.bin ({3 << 20} bytes) without keeping it" in r.stdout
    kept = "refs/workflow/discarded/spec-reviewer"
    assert sh(gp, "git", "show", f"{kept}:specs/proposed/small.md").stdout == "# small\n"
    assert sh(gp, "git", "ls-tree", "-r", "--name-only", kept).stdout.split() == ["specs/proposed/small.md"]


IGNORING = """\
import sys
sys.stdin.read()
with open("specs/proposed/mine.local.md", "a") as f:  # the owner's, which git ignores: changed
    f.write("the agent was here\\n")
with open("specs/todo/payments.local.md", "w") as f:  # new, and the owner's own rule ignores it
    f.write("# Payments\\n\\nApproved.\\n")
finish(sys.argv[1], "wrote")
"""


@needs_bwrap
@pytest.mark.parametrize("end", ["failed", "done"])
def test_files_git_ignores_are_put_back_by_a_rollback_and_never_committed(tmp_path: Path, end: str) -> None:
    """The owner's .gitignore hides nothing from a rollback: what the run created is removed, what
    the owner had is put back, what it did not touch stays. A run that succeeds commits none of
    them (the owner's .gitignore says what history holds) and names those it wrote."""
    p = agent_project(tmp_path / "ig", IGNORING, end)
    (p.dir / ".gitignore").write_text((p.dir / ".gitignore").read_text() + "*.local.md\n")
    sh(p, "git", "commit", "-qam", "the owner ignores their local notes")
    proposed = p.dir / "specs" / "proposed"
    (proposed / "mine.local.md").write_text("the owner's notes\n")
    (proposed / "kept.local.md").write_text("the owner's other notes\n")
    before = head(p)
    r = run_command_role(p, "spec-reviewer")
    assert (proposed / "kept.local.md").read_text() == "the owner's other notes\n"
    created = p.dir / "specs" / "todo" / "payments.local.md"
    if end == "failed":
        assert r.returncode == 1 and "removed specs/todo/payments.local.md" in r.stdout, r.stdout + r.stderr
        assert not created.exists() and (proposed / "mine.local.md").read_text() == "the owner's notes\n"
        assert head(p) == before
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert (
            "not committed (git ignores them): specs/proposed/mine.local.md, specs/todo/payments.local.md" in r.stdout
        )
        assert created.exists() and "the agent was here" in (proposed / "mine.local.md").read_text()
        assert sh(p, "git", "ls-tree", "-r", "--name-only", "HEAD", "--", "specs").stdout.count(".local.md") == 0
