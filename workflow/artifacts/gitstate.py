"""Git state: what a run may leave in ``.git`` and the working tree that the owner's git would
obey or stop on — new entries among git's own (locks, an operation in progress, replace refs,
alternates), FIFOs where git reads on every command — and the branch set back when a run left
it naming no commit. ``edits.planted`` and ``edits.neutralize`` use these.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NamedTuple

from workflow.artifacts import gitcmd
from workflow.artifacts.gitcmd import run_git
from workflow.artifacts.gitlayout import MAX_WALKED, odd_entries, top_of
from workflow.artifacts.gitrepo import Repo
from workflow.core import beneath
from workflow.core.config import Config
from workflow.core.files import write_atomic

# what git itself keeps in .git and may add during a run's honest work (a commit, a fetch, a gc):
# anything else new there is a lock or an operation's state (a merge, a rebase, a cherry-pick,
# a bisect, shallow grafts, a linked worktree) that the owner's next git would obey or stop on
ROUTINE = frozenset(
    {
        "HEAD", "config", "description", "hooks", "info", "objects", "refs", "index", "logs", "packed-refs",
        "COMMIT_EDITMSG", "TAG_EDITMSG", "ORIG_HEAD", "FETCH_HEAD", "AUTO_MERGE", "branches", "gc.log", "gc.pid",
    }
)  # fmt: skip
PRIVATE_INDEX = re.compile(r"^workflow-(unlink|discard|commit)-\d+\.index$")  # ours, under the project's git lock
LOCK_WAIT = 3.0  # seconds a new lock file may take to go away before it counts as planted


def git_entries(config: Config) -> list[str]:
    """What ``.git`` holds now that a run must not add: its own entries, its lock files under
    ``refs/``, its replace refs and the files of ``objects/info`` (``alternates`` would feed the
    owner's git objects from elsewhere). Saved when a run begins; ``planted`` compares."""
    git = config.project_dir / ".git"
    if not git.is_dir() or git.is_symlink():
        return []
    out = os.listdir(git)
    for here, _, files, _fd in walk_git(git, "refs"):
        rel = f"refs/{here}" if here else "refs"
        out += [f"{rel}/{n}" for n in files if n.endswith(".lock") or rel.startswith("refs/replace")]
    info = git / "objects" / "info"
    if info.is_dir() and not info.is_symlink():
        out += [f"objects/info/{n}" for n in os.listdir(info) if n not in ("packs", "commit-graph", "commit-graphs")]
    return sorted(out)


def added(git: Path, before: Collection[str], now: list[str]) -> list[Path]:
    """The entries of ``now`` that were not there ``before`` and are not git's routine ones; a
    new lock file counts once it is ``LOCK_WAIT`` seconds old (a person's git holds one briefly;
    one dated in the future is waited for ``LOCK_WAIT`` at most)."""
    new = [n for n in now if n not in before and n not in ROUTINE and not PRIVATE_INDEX.match(n)]
    locks = [n for n in new if n.endswith(".lock")]
    clock = time.time()
    ages = [clock - _mtime(git / n, clock) for n in locks]
    end = time.monotonic() + min(LOCK_WAIT, max((LOCK_WAIT - a for a in ages), default=0.0))
    while locks and time.monotonic() < end:  # a fresh lock may be a person's git at work: give it time
        time.sleep(0.05)
        locks = [n for n in locks if os.path.lexists(git / n)]
    return [git / n for n in new if not n.endswith(".lock") or n in locks]


def walk_git(git: Path, sub: str) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``beneath.walk`` of one of ``.git``'s folders; nothing when it is no plain folder (a
    symlink there is judged by ``odd_entry``)."""
    try:
        yield from beneath.walk(git, sub)
    except beneath.UnreachableError:
        return


def tree(config: Config) -> Iterator[tuple[str, list[str], list[str]]]:
    """A walk of the project (top-down: a caller may prune ``dirs``), without ``.git`` and the
    mail root, for at most ``MAX_WALKED`` entries (``beneath.walk``: each folder listed through
    the fd it was entered by, never through a symlink an agent swapped in meanwhile, and no
    deeper than ``beneath.MAX_DEPTH``)."""
    project = config.project_dir
    skip = {os.path.realpath(project / ".git"), os.path.realpath(config.mail_root)}
    seen = 0
    for here, dirs, files, _fd in beneath.walk(project):
        root = os.path.join(project, here) if here else str(project)
        dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(root, d)) not in skip]
        seen += len(files) + len(dirs)
        yield root, dirs, files
        if seen > MAX_WALKED:
            return


def odd_git_files(config: Config) -> list[Path]:
    """What the tree holds that the owner's git would block on or follow outside it (FIFOs where
    git reads, a ``.git`` file pointing elsewhere…: ``gitlayout.odd_entries``); the mail root is
    not walked."""
    project = config.project_dir
    real = Path(os.path.realpath(project))
    found = [o.path for o in odd_entries(top_of(project) or project, (config.mail_root,))]
    return [project / p.relative_to(real) if p.is_relative_to(real) else p for p in found]


def shown(config: Config, paths: Collection[Path]) -> str:
    """``paths`` as a person reads them: relative to the project where they are inside it."""
    project = config.project_dir
    return ", ".join(str(p.relative_to(project)) if p.is_relative_to(project) else str(p) for p in paths)


def _mtime(path: Path, default: float) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return default


Staged = dict[str, tuple[str, str]]  # top-relative path → (mode, sha) of its index entry, where it differs from HEAD
GONE = "000000"  # the mode of a path the index has removed


class Start(NamedTuple):
    """What a run's rollback puts ``.git`` back to: HEAD's commit and ``.git/HEAD``'s text when
    the run began, ``.git``'s entries then (``git_entries``), ``packed-refs``' bytes, what the
    index held apart from HEAD (the owner's own staged work, ``staged``), every ref (``refs``) and
    the index entries marked assume-unchanged or skip-worktree (``flagged``)."""

    head: str = ""
    head_file: str = ""
    entries: tuple[str, ...] | None = None
    packed: bytes | None = None
    staged: Staged | None = None
    refs: dict[str, str] | None = None
    flagged: tuple[str, ...] | None = None


def staged(config: Config, repo: Repo | None = None) -> Staged:
    """Every index entry that differs from HEAD (none for a repository without a commit)."""
    repo = repo or Repo.find(config)  # one the caller found already: one git call fewer
    if repo is None:
        return {}
    out = repo.git("diff-index", "--cached", "-z", "--no-renames", "HEAD", check=False)
    fields = out.split("\0")
    found: Staged = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) >= 4 and path:
            found[path] = (parts[1], parts[3])
    return found


def index_changes(before: Staged, now: Staged) -> list[str]:
    """Top-relative paths whose index entry changed from ``before`` to ``now`` (``staged``)."""
    return sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))


def gitlink(entry: tuple[str, str] | None) -> bool:
    return entry is not None and entry[0] == "160000"


def restore_index(config: Config, before: Staged, paths: Collection[str], env: dict[str, str]) -> None:
    """Put the index entries of ``paths`` back as they were when the run began: its record, or
    HEAD's entry (or none). Call holding the project's git lock (``env``)."""
    if not paths:
        return
    repo = Repo(config)
    listed = repo.git("ls-tree", "-z", "--full-tree", "HEAD", "--", *paths, check=False, env=env)
    head: Staged = {}
    for line in listed.split("\0"):
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and path:
            head[path] = (parts[0], parts[2])
    lines = []
    for p in paths:
        mode, sha = before.get(p) or head.get(p) or (GONE, "")
        lines.append(f"0 {'0' * 40}\t{p}" if mode == GONE else f"{mode} {sha}\t{p}")
    repo.git("update-index", "-z", "--index-info", env=env, input="\0".join(lines) + "\0")


def _head_tree(config: Config) -> tuple[bool, str]:
    """Whether HEAD names a commit whose tree git can read, and git's complaint when not."""
    skip = (config.mail_root,)
    p = gitcmd.run(["rev-parse", "--verify", "HEAD^{tree}"], config.project_dir, skip=skip)
    tree = p.out.decode("utf-8", "replace").strip()
    if p.code != 0 or not tree:
        return False, p.err.strip()
    q = gitcmd.run(["cat-file", "-e", tree], config.project_dir, skip=skip)
    return q.code == 0, q.err.strip()


def head_problem(config: Config, since: str) -> str:
    """Why HEAD names no readable commit now though it named ``since`` ("" when all is well, or
    the repository had no commit): a run pointed its branch at nothing, or garbled packed-refs."""
    if not since:
        return ""
    ok, why = _head_tree(config)
    return "" if ok else f"HEAD names no readable commit ({why or 'its tree is missing'})"


def repair_head(config: Config, keep: Path, begun: Start) -> list[str]:
    """Set the branch back to the commit it named when the run began, when the run left it
    naming none (every later git of the owner's, and every later run of the role, would fail):
    packed-refs git cannot read is replaced by the copy taken then, a broken loose ref is moved
    into ``keep``."""
    if not head_problem(config, begun.head):
        return []
    git = config.project_dir / ".git"
    keep.mkdir(parents=True, exist_ok=True)
    lines = []
    ok, why = _head_tree(config)
    if "packed-refs" in why and begun.packed is not None:
        os.replace(git / "packed-refs", keep / "packed-refs")
        write_atomic(git / "packed-refs", begun.packed)
        lines.append(f"put .git/packed-refs back as it was when the run began (git could not read it: {why})")
        ok, why = _head_tree(config)
    if ok:
        return lines
    text = (git / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    if text.startswith("ref: refs/"):
        ref = text[5:]
        loose = git / ref
        if os.path.lexists(loose) and ".." not in ref.split("/"):
            os.replace(loose, keep / f"ref-{Path(ref).name}")
        run_git(
            ["update-ref", "-m", "workflow: a run broke the branch", ref, begun.head],
            config.project_dir,
            skip=(config.mail_root,),
        )
    else:
        write_atomic(git / "HEAD", (begun.head + "\n").encode())
        ref = "HEAD"
    lines.append(f"set {ref} back to {begun.head[:10]}, where it was when the run began ({why or 'no tree'})")
    return lines


def refs(config: Config, repo: Repo | None = None) -> dict[str, str]:
    """Every ref's name → the object it names."""
    repo = repo or Repo.find(config)  # one the caller found already: one git call fewer
    if repo is None:
        return {}
    out = repo.git("for-each-ref", "--format=%(refname)%00%(objectname)", check=False)
    return dict(line.split("\0", 1) for line in out.splitlines() if "\0" in line)


def moved_refs(config: Config, before: dict[str, str], branch: str, repo: Repo | None = None) -> list[str]:
    """Refs the run added, moved or deleted, but the checked-out ``branch`` (whose commits are
    checked one by one) and our own ``refs/workflow/``: another branch, a tag, the stash — what
    the owner's next checkout, merge or ``stash pop`` would take unchecked."""
    now = refs(config, repo)
    return sorted(
        r
        for r in set(before) | set(now)
        if before.get(r) != now.get(r) and r != branch and not r.startswith("refs/workflow/")
    )


def put_refs_back(config: Config, before: dict[str, str], names: Collection[str], env: dict[str, str]) -> str:
    """Set each of ``names`` back to what it named (or delete it, when it is new), keeping what it
    names now under ``refs/workflow/moved/`` (a person who made it meanwhile loses nothing);
    returns that prefix."""
    repo = Repo(config)
    now = refs(config)
    kept = f"refs/workflow/moved/{int(time.time())}/"
    for name in names:
        if name in now:
            repo.git("update-ref", kept + name.removeprefix("refs/"), now[name], env=env, check=False)
        if name in before:
            repo.git("update-ref", "-m", "workflow: put back a ref a run moved", name, before[name], env=env)
        else:
            repo.git("update-ref", "-d", name, env=env, check=False)
    return kept


def flagged(config: Config, repo: Repo | None = None) -> tuple[str, ...]:
    """Index entries marked assume-unchanged or skip-worktree: git status and diff stay silent on
    their changes (a run could hide an edit to a file the owner runs)."""
    repo = repo or Repo.find(config)  # one the caller found already: one git call fewer
    if repo is None:
        return ()
    out = repo.git("ls-files", "-v", "-z", check=False)
    return tuple(sorted(e[2:] for e in out.split("\0") if len(e) > 2 and (e[0].islower() or e[0] == "S")))


def unflag(config: Config, paths: Collection[str], env: dict[str, str]) -> None:
    if paths:
        repo = Repo(config)
        repo.git("update-index", "--no-assume-unchanged", "--no-skip-worktree", "--", *paths, env=env, check=False)
