"""Git repo: what changed between state folders, read with the git binary (fast enough for hooks).

Paths git prints are relative to the repository's top; a project may sit in a subdirectory,
so ``Repo`` converts between the two. A move is a deletion at ``ROOT/A/NAME`` paired with an
addition at ``ROOT/B/NAME`` in the same change set (renames are never guessed by similarity,
so a file edited while it moves still counts as the same artifact).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from workflow.artifacts.gitcmd import run_git
from workflow.core.config import Config
from workflow.core.errors import GitError, GitLayoutError
from workflow.core.locate import Artifact, parse_path


class Move(NamedTuple):
    """An artifact that changed state folder in one change set."""

    before: Artifact
    after: Artifact


class Change(NamedTuple):
    status: str  # A, D, M, T…
    path: str  # project-relative


@functools.lru_cache(maxsize=64)
def _where(project: Path, mail_root: Path) -> tuple[Path, Path, Path, str]:
    """Where the repository holding ``project`` is: its top, git directory, hooks and the project's
    prefix in it. Kept per process once found (a run's end makes a dozen ``Repo``s of one project;
    each git command they run checks the layout again); a project in no repository is asked anew."""
    out = run_git(
        ["rev-parse", "--show-toplevel", "--git-dir", "--git-path", "hooks"], project, check=False, skip=(mail_root,)
    )
    lines = out.splitlines()
    if len(lines) < 3:
        raise GitError(f"{project} is not inside a git repository; run `workflow init` (it runs git init)")
    top = Path(lines[0]).resolve()
    rel = project.resolve().relative_to(top).as_posix()
    return top, (project / lines[1]).resolve(), (project / lines[2]).resolve(), "" if rel == "." else rel + "/"


class Repo:
    """The git repository holding a project."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.top, self.git_dir, self.hooks_dir, self.prefix = _where(config.project_dir, config.mail_root)

    @classmethod
    def find(cls, config: Config) -> Repo | None:
        """The project's repository, or None when it is in none (GitLayoutError when git must not
        run there now: that is no reason to carry on as if there were no repository)."""
        try:
            return cls(config)
        except GitLayoutError:
            raise
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
        """``git ARGS`` at the repository's top (``gitcmd.run_git``; the mail root is never walked;
        ``pass_fds``: open files git reads as ``/proc/self/fd/N``)."""
        return run_git(
            args, self.top, check=check, env=env, input=input, skip=(self.config.mail_root,), pass_fds=pass_fds
        )

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
