"""Plumbing: the owner's commits made from bytes our code read — git never opens a working-tree path an agent can swap.

Porcelain git (``git add``, ``git commit -- PATH``, ``git mv``, ``git hash-object PATH``) opens the
working tree by path, checking the folders on the way with ``lstat`` first. An agent that swaps
a folder for a symlink in that instant has the owner's git read the owner's file into an object
the agent can then read, or rename an artifact into the owner's ``~/.claude``. So every byte the
owner's git stores from the working tree is read here through ``core.beneath`` (from a folder
fd, no symlink followed) and handed to git as ``/proc/self/fd/N`` — the very file that was
opened. A commit is built on a private index from HEAD plus those entries (``read-tree``,
``update-index --index-info``, ``write-tree``, ``commit-tree``), HEAD is moved only from the
commit it was built on (``update-ref NEW OLD``), and the project's index is told of the same
entries; the project's own hooks run as ``git commit`` would run them (``git hook run``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from workflow.artifacts import gitcmd
from workflow.artifacts.gitrepo import Repo
from workflow.core import beneath
from workflow.core.config import Config
from workflow.core.errors import ArtifactError, GitError

BATCH = 200  # files open at once while git hashes them
ZERO = "0" * 40


class Entry(NamedTuple):
    """A file as git stores it: its mode and its blob."""

    mode: str  # 100644 | 100755
    sha: str


def _open(config: Config, rel: str) -> tuple[int, int] | None:
    """An fd of the regular file at ``rel`` reached through no symlink, and its mode bits; None otherwise."""
    try:
        up, name = beneath.split(rel)
        with beneath.folder(config.project_dir, up) as d:
            fd = os.open(name, beneath.READ_FLAGS, dir_fd=d)
    except (ArtifactError, OSError):  # not a plain path, or nothing plain there
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st.st_mode


def hash_files(config: Config, repo: Repo, rels: Iterable[str], *, write: bool = True) -> dict[str, Entry | None]:
    """Project path → its blob (written into git's object store with ``write``), or None when it is
    not a regular file reached through no symlink (absent, a symlink, a FIFO, a folder)."""
    out: dict[str, Entry | None] = {}
    todo = list(dict.fromkeys(rels))
    for i in range(0, len(todo), BATCH):
        opened: list[tuple[str, int, int]] = []
        try:
            for rel in todo[i : i + BATCH]:
                got = _open(config, rel)
                if got is None:
                    out[rel] = None
                else:
                    opened.append((rel, *got))
            if not opened:
                continue
            fds = tuple(fd for _, fd, _ in opened)
            names = "".join(f"/proc/self/fd/{fd}\n" for fd in fds)
            args = ["hash-object", *(["-w"] if write else []), "--no-filters", "--stdin-paths"]
            shas = repo.git(*args, input=names, pass_fds=fds).split()
            if len(shas) != len(opened):
                raise GitError(f"git hash-object gave {len(shas)} ids for {len(opened)} files")
            for (rel, _, mode), sha in zip(opened, shas, strict=True):
                out[rel] = Entry("100755" if mode & stat.S_IXUSR else "100644", sha)
        finally:
            for _, fd, _ in opened:
                os.close(fd)
    return out


def _info(repo: Repo, changes: Mapping[str, Entry | None]) -> str:
    lines = [
        f"0 {ZERO}\t{repo.to_top(p)}" if e is None else f"{e.mode} {e.sha}\t{repo.to_top(p)}"
        for p, e in changes.items()
    ]
    return "\0".join(lines) + "\0"


def stage(repo: Repo, changes: Mapping[str, Entry | None], env: dict[str, str]) -> None:
    """Tell the project's index of ``changes`` (None: the path is gone), reading nothing from the working tree."""
    if changes:
        repo.git("update-index", "-z", "--index-info", input=_info(repo, changes), env=env)


def commit(
    repo: Repo, changes: Mapping[str, Entry | None], message: str, *, author: str, env: dict[str, str], hooks: bool
) -> str:
    """One commit of HEAD plus ``changes``, authored ``author`` (``Name <email>``), made the new HEAD
    only if HEAD is still the commit it was built on; the project's index is updated to match.
    With ``hooks``, pre-commit runs on the commit's index first and post-commit after it, as
    ``git commit`` runs them. Call holding the project's git lock (``env``). Returns its id."""
    head = repo.head()
    index = repo.git_dir / f"workflow-commit-{os.getpid()}.index"
    private = {**env, "GIT_INDEX_FILE": str(index)}
    name, _, email = author.partition(" <")
    who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email.rstrip(">")} if author else {}
    try:
        if head:
            repo.git("read-tree", head, env=private)
        else:
            repo.git("read-tree", "--empty", env=private)
        repo.git("update-index", "-z", "--index-info", input=_info(repo, changes), env=private)
        if hooks:
            repo.git("hook", "run", "--ignore-missing", "pre-commit", env=private)
        tree = repo.git("write-tree", env=private).strip()
    finally:
        index.unlink(missing_ok=True)
    parents = ["-p", head] if head else []
    sha = repo.git("commit-tree", tree, *parents, input=message, env={**env, **who}).strip()
    subject = message.split("\n", 1)[0][:200]
    # noted before HEAD names it: another run checking its own commits meanwhile (``history``)
    # must never see a commit of ours that the ledger does not hold yet
    _ours(repo.config, sha)
    repo.git("update-ref", "-m", f"commit: {subject}", "HEAD", sha, head or ZERO, env=env)
    stage(repo, changes, env)
    if hooks:
        repo.git("hook", "run", "--ignore-missing", "post-commit", env=env, check=False)
    return sha


def blob(repo: Repo, sha: str) -> bytes:
    """The bytes of a blob (to put a file back as it was)."""
    p = gitcmd.run(["cat-file", "blob", sha], repo.top, skip=(repo.config.mail_root,))
    if p.code != 0:
        raise GitError(f"cannot read blob {sha[:10]}: {p.err.strip()}")
    return p.out


def _ours(config: Config, sha: str) -> None:
    """Note ``sha`` in the owner's ledger of the commits our code made (``StateDir.commits``)."""
    try:
        fd = os.open(config.state.commits, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # the state directory is out of sight (an agent's own `workflow move` in its sandbox)
        return
    try:
        os.write(fd, f"{sha}\n".encode())
    finally:
        os.close(fd)


def ours(config: Config) -> set[str]:
    """The commits the owner's own code made (the ledger ``_ours`` keeps)."""
    try:
        with open(config.state.commits, encoding="ascii", errors="replace") as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()


def head_entries(repo: Repo, rels: Iterable[str], ref: str = "HEAD") -> dict[str, Entry]:
    """The entries ``ref``'s tree has for ``rels`` (project paths; those it lacks are left out)."""
    spec = [repo.to_top(p) for p in rels]
    if not spec or repo.head() is None:
        return {}
    out: dict[str, Entry] = {}
    for line in repo.git("ls-tree", "-z", "--full-tree", ref, "--", *spec).split("\0"):
        meta, _, path = line.partition("\t")
        fields = meta.split()
        rel = repo.to_project(path)
        if len(fields) == 3 and fields[1] == "blob" and rel is not None:
            out[rel] = Entry(fields[0], fields[2])
    return out


def index_entries(repo: Repo, rels: Iterable[str]) -> dict[str, Entry]:
    """The entries the project's index has for ``rels`` (stage 0 blobs only)."""
    spec = [repo.to_top(p) for p in rels]
    if not spec:
        return {}
    out: dict[str, Entry] = {}
    for line in repo.git("ls-files", "-s", "-z", "--", *spec).split("\0"):
        meta, _, path = line.partition("\t")
        fields = meta.split()
        rel = repo.to_project(path)
        if len(fields) == 3 and fields[2] == "0" and fields[0] in ("100644", "100755") and rel is not None:
            out[rel] = Entry(fields[0], fields[1])
    return out
