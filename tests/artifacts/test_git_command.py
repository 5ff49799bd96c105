"""The owner's git, built and run in one place (``artifacts.gitcmd``), against real git: it never
enters an embedded repository, a git stuck on a FIFO is stopped at its deadline or when its
scope (a run's tool call) is stopped — releasing the project's git lock —, and no module of
ours starts git any other way."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project, sh
from workflow.artifacts import gitcmd
from workflow.artifacts.edits import snapshot
from workflow.artifacts.gitlock import project_lock
from workflow.core.errors import GitError, GitLayoutError

ROOT = Path(__file__).resolve().parents[2]


def no_reader(fifo: Path) -> bool:
    """Whether nothing has ``fifo`` open for reading (the git that waited on it is gone)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        return e.errno == errno.ENXIO
    os.close(fd)
    return False


def reading(path: Path) -> bool:
    """Whether a git hash-object of ``path`` runs (from /proc: it waits in open() for a writer, and
    opening the FIFO to ask would be that writer)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hash-object" in argv and str(path).encode() in argv:
            return True
    return False


def wait_for(check: object, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not (callable(check) and check()):
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def test_the_owners_move_and_status_never_enter_an_embedded_repository(tmp_path: Path) -> None:
    """A repository embedded in the project (a person's, or one a run left) whose config names a
    clean filter and a textconv, staged as a gitlink, with a .gitmodules that asks git to look
    inside it: the next run's snapshot of the artifact roots, the owner's moves, hooks, board and
    doctor run none of them."""
    p = git_project(tmp_path / "p")
    canary = tmp_path / "canary"
    canary.mkdir()
    sub = p.dir / "specs" / "todo" / "sub"
    sh(p, "git", "init", "-q", str(sub))
    (sub / "t.txt").write_text("t\n")
    sh(p, "git", "add", "t.txt", cwd=sub)
    sh(p, "git", "commit", "-qm", "t", cwd=sub)
    sh(p, "git", "config", "filter.x.clean", f"touch {canary}/clean; cat", cwd=sub)
    sh(p, "git", "config", "diff.x.textconv", f"touch {canary}/textconv; cat", cwd=sub)
    (sub / ".git" / "info" / "attributes").write_text("* filter=x diff=x\n")
    os.utime(sub / "t.txt", (1, 1))
    head = sh(p, "git", "rev-parse", "HEAD", cwd=sub).stdout.strip()
    (p.dir / ".gitmodules").write_text('[submodule "sub"]\n\tpath = specs/todo/sub\n\turl = ./x\n\tignore = none\n')
    sh(p, "git", "update-index", "--add", "--cacheinfo", f"160000,{head},specs/todo/sub")
    snapshot(p.app.config)  # what a run takes of the artifact roots as it begins: `git status -- specs`
    assert list(canary.iterdir()) == []
    for args in (("move", "user-auth", "todo", "--as", "spec-reviewer"), ("status",), ("doctor",)):
        p.run(*args, env=GIT_ENV)
        assert list(canary.iterdir()) == [], args
    assert (p.dir / "specs" / "todo" / "user-auth.md").is_file()
    sh(p, "git", "status")  # the plain git of a person does enter it: what the pins keep from the owner's side
    assert list(canary.iterdir()) == [p.dir.parent / "canary" / "clean"]


def test_a_fifo_in_the_tree_is_refused_before_git_runs_naming_it(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    fifo = p.dir / "specs" / "proposed" / ".gitignore"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(GitLayoutError, match=re.escape(str(fifo)) + " is a FIFO"):
        gitcmd.run_git(["status", "--porcelain"], p.dir)
    assert time.monotonic() - t0 < 5
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer", env=GIT_ENV)
    assert r.returncode != 0 and f"{fifo} is a FIFO" in r.stderr, r.stderr


def test_a_git_stuck_on_a_fifo_is_stopped_at_its_deadline_with_everything_it_started(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    fifo = tmp_path / "pipe"  # outside the tree: the check before git runs cannot see it
    os.mkfifo(fifo)
    scope = gitcmd.Scope(deadline=time.monotonic() + 1.0)
    t0 = time.monotonic()
    with scope.active(), pytest.raises(GitError, match="did not finish within 1s and was stopped"):
        gitcmd.run_git(["hash-object", "--no-filters", str(fifo)], p.dir)
    assert time.monotonic() - t0 < 1.0 + 3 * gitcmd.GRACE
    assert no_reader(fifo)


def test_stopping_a_scope_ends_its_stuck_git_and_releases_the_projects_git_lock(tmp_path: Path) -> None:
    """What the tool server does at a run's end to a call still under way."""
    p = git_project(tmp_path / "p")
    config = p.app.config
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    scope = gitcmd.Scope()
    failed: list[str] = []

    def call() -> None:
        with scope.active(), project_lock(config) as env:
            try:
                gitcmd.run_git(["hash-object", "--no-filters", str(fifo)], p.dir, env=env)
            except GitError as e:
                failed.append(str(e))

    worker = threading.Thread(target=call)
    worker.start()
    wait_for(lambda: reading(fifo))  # the hash-object, not the lock's `git var`
    assert scope.stop("the run has ended") == 1
    worker.join(timeout=3 * gitcmd.GRACE)
    assert not worker.is_alive() and failed == ["git hash-object was stopped: the run has ended"]
    assert no_reader(fifo)
    with project_lock(config, wait=1.0):  # free again
        pass


def test_a_stopped_scope_gives_up_waiting_for_the_projects_git_lock(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    config = p.app.config
    scope = gitcmd.Scope()
    failed: list[str] = []

    def call() -> None:
        with scope.active():
            try:
                with project_lock(config):
                    pass
            except GitError as e:
                failed.append(str(e))

    with project_lock(config):  # another writer holds it (stuck, say)
        worker = threading.Thread(target=call)
        worker.start()
        scope.stop("the run has ended")
        worker.join(timeout=5)
    assert not worker.is_alive() and len(failed) == 1 and failed[0].endswith("the run has ended"), failed


def test_no_module_of_ours_starts_git_but_through_gitcmd() -> None:
    """Say it once: a git started by hand (``["git", …]``) would lack the pins, the check of the
    layout and the deadline."""
    by_hand = re.compile(r"""\[\s*["']git["']\s*,""")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "workflow").rglob("*.py"))
        if path.name != "gitcmd.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if by_hand.search(line)
    ]
    assert found == []
    assert gitcmd.argv(["status", "-z"])[-3:] == ["status", "--ignore-submodules=dirty", "-z"]
    for pin in ("core.fsmonitor=false", "submodule.recurse=false", "diff.ignoreSubmodules=dirty"):
        assert pin in gitcmd.argv(["commit"])


def test_the_layout_check_keeps_clean_folders_only_while_nothing_changes_in_them(tmp_path: Path) -> None:
    """Every owner-side git walks the tree first; folders found clean are kept by their ctime (no
    process can set it back), so a FIFO made later in one — its mtime then set back — is found."""
    from workflow.artifacts import gitlayout

    top = tmp_path / "t"
    (top / "specs" / "todo").mkdir(parents=True)
    (top / "specs" / "todo" / "a.md").write_text("a\n")
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    time.sleep(gitlayout.RACY_NS / 1e9 + 0.1)  # the clock, not an event: folders older than the racy window
    assert gitlayout.problem(top) == ""
    folder = top / "specs" / "todo"
    assert str(folder) in gitlayout.CLEAN  # kept
    before = os.stat(folder)
    os.mkfifo(folder / ".gitattributes")
    os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime back: ctime moves all the same
    assert ".gitattributes" in gitlayout.problem(top)
