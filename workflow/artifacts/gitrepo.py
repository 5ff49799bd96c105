"""Git repo: what changed between state folders, read with the git binary (fast enough for hooks).

Paths git prints are relative to the repository's top; a project may sit in a subdirectory,
so ``Repo`` converts between the two. A move is a deletion at ``ROOT/A/NAME`` paired with an
addition at ``ROOT/B/NAME`` in the same change set (renames are never guessed by similarity,
so a file edited while it moves still counts as the same artifact).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from workflow.core.config import Config
from workflow.core.errors import GitError
from workflow.core.locate import Artifact, parse_path


class Move(NamedTuple):
    """An artifact that changed state folder in one change set."""

    before: Artifact
    after: Artifact


class Change(NamedTuple):
    status: str  # A, D, M, T…
    path: str  # project-relative


# a repository's config never makes our git run a program, and its replace refs never make our
# git see one commit as another (a forged commit of a control file passed off as harmless)
PINNED = ("--no-replace-objects", "-c", "core.fsmonitor=false")
INDEX_BUSY_WAIT = 10.0  # seconds to wait out another git's index.lock (a person's git, an agent's)


REDIRECTS = ("commondir", "gitdir", "config.worktree")  # files that point git's config and hooks elsewhere
WRITTEN_THROUGH = ("config", "index", "HEAD", "packed-refs", "hooks", "info", "refs", "objects")


GIT_DIRS = ("hooks", "info", "refs", "objects")


def odd_entry(path: Path, is_dir: bool) -> str:
    """What is wrong with one of git's own entries ("" when nothing): a symlink (git writes
    through it) or something that is not a plain file or folder (a FIFO blocks git for good)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symlink: git would write through it"
    if not (stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)):
        return f"{path} is not a plain {'folder' if is_dir else 'file'}: git would block on it or fail"
    return ""


def layout_problem(cwd: Path) -> str:
    """What in the repository's ``.git`` would make the owner's git obey or write through
    something an agent planted ("" when nothing): a redirect (``commondir``, ``gitdir``,
    ``config.worktree``: another config, other hooks) or a symlink where git writes (git's lock
    files write through a symlinked ``index``, ``HEAD``, ref…). A few ``lstat`` calls: every git
    command of the owner's checks it first. A ``.git`` file (a linked worktree, a submodule) is
    git's own arrangement and is not judged."""
    for d in (cwd, *cwd.parents):
        g = d / ".git"
        if not os.path.lexists(g):
            continue
        if os.path.islink(g):
            return f"{g} is a symlink"
        if not os.path.isdir(g):
            return ""
        for name in REDIRECTS:
            if os.path.lexists(g / name):
                return f"{g / name} exists: it would point git at another config and other hooks"
        for name in WRITTEN_THROUGH:
            problem = odd_entry(g / name, name in GIT_DIRS)
            if problem:
                return problem
        return ""
    return ""


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    env: dict[str, str] | None = None,
    input: str | None = None,
    pass_fds: tuple[int, ...] = (),
) -> str:
    """Run git; return stdout (``pass_fds``: open files git reads as ``/proc/self/fd/N``). A
    failure raises GitError carrying git's own message. A command
    that meets another git's ``index.lock`` is tried again for a while: our own writes queue on
    the project's lock (``gitlock``), but a person's git or an agent's may hold the index."""
    problem = layout_problem(Path(cwd))
    if problem:
        raise GitError(f"refusing to run git here: {problem} (a run's agent may have planted it; `workflow doctor`)")
    end = time.monotonic() + INDEX_BUSY_WAIT
    delay = 0.01
    while True:
        try:
            p = subprocess.run(
                ["git", *PINNED, *args],
                cwd=cwd,
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, **(env or {})},
                input=input,
                pass_fds=pass_fds,
            )
        except FileNotFoundError:
            raise GitError("git is not installed (no `git` on PATH)") from None
        if p.returncode == 0 or "index.lock" not in p.stderr or time.monotonic() > end:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    if check and p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        raise GitError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {p.returncode}'}")
    return p.stdout


class Repo:
    """The git repository holding a project."""

    def __init__(self, config: Config) -> None:
        self.config = config
        project = config.project_dir
        out = run_git(["rev-parse", "--show-toplevel", "--git-dir", "--git-path", "hooks"], project, check=False)
        lines = out.splitlines()
        if len(lines) < 3:
            raise GitError(f"{project} is not inside a git repository; run `workflow init` (it runs git init)")
        self.top = Path(lines[0]).resolve()
        self.git_dir = (project / lines[1]).resolve()
        self.hooks_dir = (project / lines[2]).resolve()
        rel = project.resolve().relative_to(self.top).as_posix()
        self.prefix = "" if rel == "." else rel + "/"

    @classmethod
    def find(cls, config: Config) -> Repo | None:
        try:
            return cls(config)
        except GitError:
            return None

    def git(
        self,
        *args: str,
        check: bool = True,
        env: dict[str, str] | None = None,
        input: str | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> str:
        return run_git(args, self.top, check=check, env=env, input=input, pass_fds=pass_fds)

    def to_project(self, path: str) -> str | None:
        """A top-relative path as project-relative, or None when it is outside the project."""
        if not path.startswith(self.prefix):
            return None
        return path[len(self.prefix) :]

    def to_top(self, path: str) -> str:
        return self.prefix + path

    def _changes(self, out: str) -> list[Change]:
        fields = out.split("\0")
        changes: list[Change] = []
        i = 0
        while i + 1 < len(fields):
            status, path = fields[i], fields[i + 1]
            i += 2
            rel = self.to_project(path)
            if rel is not None and status:
                changes.append(Change(status[0], rel))
        return changes

    def staged(self) -> list[Change]:
        """What ``git commit`` would record now (index against HEAD; everything when no HEAD)."""
        head = self.head()
        base = head or self.git("hash-object", "-t", "tree", "/dev/null").strip()
        return self._changes(self.git("diff", "--cached", "--name-status", "--no-renames", "-z", base))

    def committed(self, sha: str) -> list[Change]:
        """What commit ``sha`` changed against its first parent (everything for a root commit)."""
        return self._changes(
            self.git("diff-tree", "-r", "--root", "--no-commit-id", "--name-status", "--no-renames", "-z", sha)
        )

    def head(self) -> str | None:
        out = self.git("rev-parse", "--verify", "-q", "HEAD", check=False).strip()
        return out or None

    def parent(self, sha: str) -> str:
        out = self.git("rev-parse", "--verify", "-q", f"{sha}^", check=False).strip()
        return out or "root"

    def message(self, sha: str) -> str:
        return self.git("log", "-1", "--format=%B", sha)

    def tracked(self, ref: str | None = "HEAD", paths: Iterable[str] = ()) -> list[str]:
        """Project-relative files in ``ref``'s tree (or the index when ref is None)."""
        spec = [self.to_top(p) for p in paths] or [self.prefix or "."]
        if ref is None:
            out = self.git("ls-files", "-z", "--", *spec)
        else:
            if self.head() is None:
                return []
            out = self.git("ls-tree", "-r", "-z", "--name-only", ref, "--", *spec)
        return [r for r in (self.to_project(p) for p in out.split("\0") if p) if r is not None]


def moves(changes: Iterable[Change], config: Config) -> list[Move]:
    """Pair deletions with additions of the same artifact in another state folder."""
    gone: dict[tuple[str, str], Artifact] = {}
    added: list[Artifact] = []
    for c in changes:
        a = parse_path(c.path, config)
        if a is None:
            continue
        if c.status == "D":
            gone[a.key] = a
        elif c.status == "A":
            added.append(a)
    return [Move(gone[a.key], a) for a in added if a.key in gone and gone[a.key].state != a.state]


def artifacts_in(paths: Iterable[str], config: Config) -> list[Artifact]:
    return [a for a in (parse_path(p, config) for p in paths) if a is not None]
