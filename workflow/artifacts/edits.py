"""Edits: what a run changed in the artifact roots — committed as its role, or put back.

A run's transaction (``agents.txn``) takes a *snapshot* of the artifact roots when it begins: the
git blob of every file there (the index's blob for a clean file; a clean file costs nothing to
read), every dirty or untracked file's contents written into git's object store, so the run can
always be put back. When the run ends:

* **changed** — the run's edits: files under the artifact roots that differ from the snapshot and
  are not committed (dirty against HEAD: a file another run committed meanwhile is that run's).
  A tools-only run (the anthropic and scripted backends) claims only what its ``write_artifact``
  calls wrote; a shell agent claims every such change except what another open run wrote with
  its tools (two shell agents editing at once cannot be told apart: give them different roots).
  Files git ignores are seen too (``git status --ignored``: a ``.gitignore`` hides nothing from
  the transaction), and kept apart: a rollback puts them back like the rest (one the run created
  is removed, one the owner had is restored or left as it was), but a run's commit never takes
  one — what history holds is the owner's ``.gitignore``'s to say, as for their own ``git add``;
* **commit** — one commit of those paths, authored as the role, with ``Workflow-Role`` and
  ``Workflow-Notify: none`` trailers (nobody is told of an edit; the run's mail says what it did);
* **restore** — each path back to its snapshot content (a file the run created is removed), and
  the paths the run had committed (moves that carried its edits) committed back. Nothing is put
  back where the artifact now sits in another state folder (someone moved it on). A shell
  agent's changes cannot be told from a person's made at the same time, so before a shell run is
  put back, what it discards is kept in a commit on ``refs/workflow/discarded/ROLE``, up to a cap
  (``artifacts.discard``): what is larger is named in the log and dropped.

Symlinks are never followed: one a run creates is not committed, and a rollback removes it.
Every git write here holds the project's git lock (``gitlock``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from workflow.artifacts import discard, plumbing
from workflow.artifacts.gitlayout import GIT_DIRS, REDIRECTS, WRITTEN_THROUGH, odd_entry
from workflow.artifacts.gitlock import project_lock
from workflow.artifacts.gitrepo import Change as GitChange
from workflow.artifacts.gitrepo import Repo, moves
from workflow.artifacts.gitstate import (
    Start,
    added,
    flagged,
    git_entries,
    gitlink,
    index_changes,
    moved_refs,
    odd_git_files,
    put_refs_back,
    refs,
    repair_head,
    restore_index,
    shown,
    staged,
    unflag,
    walk_git,
)
from workflow.core import beneath, control
from workflow.core.config import CONFIG_NAME, Config
from workflow.core.errors import ArtifactError, GitError
from workflow.core.locate import parse_path

RUN_TOLD = "a run's edits: its mail says what it did"
LINK = "symlink"  # a snapshot's entry for a symlink (never followed, never committed)
ABSENT = ""


class Tree(NamedTuple):
    """The artifact roots at one moment: path → blob id (``LINK`` for a symlink), the paths that
    differ from HEAD (modified, added, deleted or untracked — ignored ones too), and those of them
    that git ignores (``.gitignore``, the owner's excludes)."""

    blobs: dict[str, str]
    dirty: frozenset[str]
    ignored: frozenset[str] = frozenset()


class Changed(NamedTuple):
    """A run's uncommitted edits (``changed``): what its commit takes, and what git ignores."""

    paths: list[str]  # tracked by git, or untracked and not ignored: committed when the run succeeds
    ignored: list[str]  # what git ignores: never committed, but put back like the rest by a rollback

    @property
    def all(self) -> list[str]:
        return sorted({*self.paths, *self.ignored})


def author(config: Config, role: str) -> str:
    """The git author of a role's commits: ``role <role@domain>``."""
    return f"{role} <{role}@{config.domain}>"


def _status(repo: Repo, roots: list[str], *, ignored: bool = False) -> list[tuple[str, str]]:
    """(XY, project path) of every dirty or untracked file under ``roots`` — with ``ignored``, every
    file git ignores too (XY ``!!``, each file of an ignored folder on its own)."""
    wide = ["--ignored=traditional"] if ignored else []
    out = repo.git("status", "--porcelain=v1", "-z", "-uall", *wide, "--no-renames", "--", *roots)
    entries = []
    for item in out.split("\0"):
        if len(item) > 3:
            rel = repo.to_project(item[3:])
            if rel is not None:
                entries.append((item[:2], rel))
    return entries


def snapshot(config: Config, repo: Repo | None = None, *, keep: bool = True, verify: bool = False) -> Tree:
    """The artifact roots now; dirty and untracked files' contents — those git ignores among them:
    git's ignore rules never hide a file from a rollback — are kept in git's object store
    (``keep=False``: only their ids are computed, for a comparison). ``verify``: every tracked
    file is read and hashed too, not taken as clean on the word of the index's stat cache — which
    an agent can write (the index is writable in its sandbox) so that ``git status`` misses an edit."""
    repo = repo or Repo.find(config)
    if repo is None:
        return Tree({}, frozenset())
    roots = [repo.to_top(r) for r in config.artifact_roots if (config.project_dir / r).is_dir()]
    if not roots:
        return Tree({}, frozenset())
    blobs: dict[str, str] = {}
    files: list[str] = []  # tracked regular files
    for entry in repo.git("ls-files", "-s", "-z", "--", *roots).split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            rel = repo.to_project(path)
            if rel is not None:
                blobs[rel] = LINK if meta.startswith("120000") else meta.split()[1]
                if meta.startswith("100"):
                    files.append(rel)
    dirty: set[str] = set()
    ignored: set[str] = set()
    to_hash: list[str] = []
    for xy, rel in _status(repo, roots, ignored=True):
        dirty.add(rel)
        if xy == "!!":
            ignored.add(rel)
        if rel.endswith("/"):  # a folder git will not enter (an embedded repository): no file of ours
            blobs[rel] = ABSENT
            continue
        st = beneath.lstat(config.project_dir, rel)
        if (st is not None and stat.S_ISLNK(st.st_mode)) or beneath.through_link(config.project_dir, rel):
            blobs[rel] = LINK
        elif st is None or not stat.S_ISREG(st.st_mode):
            blobs[rel] = ABSENT
        else:
            to_hash.append(rel)
    for rel, found in plumbing.hash_files(config, repo, to_hash, write=keep).items():  # read by us, never by git's path
        blobs[rel] = ABSENT if found is None else found.sha
    if verify:
        clean = [p for p in files if p not in dirty]
        for rel, found in plumbing.hash_files(config, repo, clean, write=False).items():
            if found is not None and found.sha != blobs.get(rel):
                dirty.add(rel)
                blobs[rel] = found.sha
    return Tree({k: v for k, v in blobs.items() if v != ABSENT}, frozenset(dirty), frozenset(ignored))


def changed(
    config: Config, base: dict[str, str], written: Collection[str] | None, others: Collection[str] = ()
) -> Changed:
    """The run's uncommitted edits: paths that differ from ``base`` and from HEAD — only those in
    ``written`` when given (a tools-only run), never those in ``others`` (other runs' writes) —
    with those git ignores apart: a file the owner had that git ignores differs from ``base`` only
    when the run changed it."""
    with project_lock(config):  # another run's move renames and commits under it: never seen half done
        now = snapshot(config, keep=False, verify=True)
    out = [p for p in now.dirty if now.blobs.get(p, ABSENT) != base.get(p, ABSENT)]
    if written is not None:
        out = [p for p in out if p in written]
    out = sorted(p for p in out if p not in others)
    return Changed([p for p in out if p not in now.ignored], [p for p in out if p in now.ignored])


def _check(config: Config, paths: Iterable[str]) -> None:
    """Refuse edits that write a workflow.toml, that are really moves (a file deleted in one state
    folder, added in another: moves go through ``workflow move``, which checks the transition) or
    that leave an artifact in two state folders."""
    for p in paths:
        if PurePosixPath(p).name == CONFIG_NAME:
            raise GitError(
                f"the run wrote {p}: a workflow.toml in the project would be obeyed by the owner's commands "
                "run below it; a run never writes one"
            )
    changes = [GitChange("A" if _there(config, p) else "D", p) for p in paths]
    for m in moves(changes, config):
        raise GitError(
            f"the run moved {m.before.path} to {m.after.path} by hand; moves go through move_artifact "
            "(or `workflow move`), which checks the transition"
        )
    for p in paths:
        a = parse_path(p, config)
        if a is None or not _there(config, p):
            continue
        twins = [s for s in config.states if s != a.state and _there(config, f"{a.root}/{s}/{a.name}")]
        if twins:
            raise GitError(f"{p} would be in two state folders (also in {', '.join(twins)}/)")


class Committed(NamedTuple):
    sha: str | None  # None: nothing to commit
    paths: tuple[str, ...]  # what the commit holds
    skipped: tuple[str, ...] = ()  # symlinks: never committed


def commit(config: Config, role: str, paths: list[str], why: str, told: str = RUN_TOLD) -> Committed:
    """Commit ``paths`` as ``role``, in one commit (symlinks are left out, and said). The files are
    read through ``core.beneath`` and committed from those bytes (``plumbing``): git never opens
    a path another run's agent could swap for a symlink meanwhile. ``told``: the ``Workflow-Notify``
    trailer's reason (nobody is told of an edit by the hook)."""
    links = tuple(
        p for p in paths if (st := beneath.lstat(config.project_dir, p)) is not None and stat.S_ISLNK(st.st_mode)
    )
    paths = [p for p in paths if p not in links]
    if not paths:
        return Committed(None, (), links)
    _check(config, paths)
    repo = Repo(config)
    names = ", ".join(sorted({printable(Path(p).name) for p in paths}))
    message = (
        f"{role}: {why} {names}\n\n"
        f"Workflow-Role: {role}\nWorkflow-Edits: {len(paths)} file(s)\n"
        f"Workflow-Notify: none ({told})\n"
    )
    with project_lock(config) as env:
        now = plumbing.hash_files(config, repo, paths)
        head = plumbing.head_entries(repo, paths)
        changes = {p: now[p] for p in paths if now[p] != head.get(p) and (now[p] is not None or p in head)}
        if not changes:
            return Committed(None, (), links)
        sha = plumbing.commit(repo, changes, message, author=author(config, role), env=env, hooks=True)
        return Committed(sha, tuple(sorted(changes)), links)


def restore(
    config: Config,
    base: dict[str, str],
    paths: Iterable[str],
    committed: Collection[str],
    role: str,
    why: str,
    keep: bool = False,
) -> list[str]:
    """Put each path back as ``base`` had it; commit back those in ``committed`` (paths the run's
    own commits changed) that now differ from HEAD. With ``keep`` (a shell agent's run, whose
    edits cannot be told from a person's made meanwhile), what is discarded is first kept in a
    commit on ``refs/workflow/discarded/ROLE``, so nothing is lost. Returns a line per change."""
    repo = Repo.find(config)
    if repo is None:
        return []
    lines: list[str] = []
    with project_lock(config) as env:
        for p in sorted(set(paths)):
            lines += _unlink_parents(config, p)  # never written, removed or read through a planted symlink
        todo = sorted(p for p in set(paths) if not _twin_elsewhere(config, base, p, set(paths)))
        for p in sorted(set(paths) - set(todo)):
            lines.append(f"left {p} alone: the artifact is in another state folder now")
        if keep:
            lines += discard.keep(config, repo, base, todo, role, why, env)
        top = config.project_dir
        now = plumbing.hash_files(config, repo, todo, write=False)
        for p in todo:
            want = base.get(p, ABSENT)
            st = beneath.lstat(top, p)
            if want in (ABSENT, LINK):
                # a folder is no file the run made: a symlink it made there was replaced by one above
                # (``_unlink_parents``), and what is under it is put back path by path
                if st is not None and not stat.S_ISDIR(st.st_mode) and (want == ABSENT or not stat.S_ISLNK(st.st_mode)):
                    beneath.remove(top, p)
                    lines.append(f"removed {p}, which the run created")
                continue
            entry = now.get(p)
            if entry is not None and entry.sha == want:
                continue
            if st is not None and not stat.S_ISREG(st.st_mode):
                beneath.remove(top, p)  # a symlink or a FIFO where the file was: the entry itself goes
            beneath.write(top, p, plumbing.blob(repo, want))
            lines.append(f"put {p} back as it was before the run")
        back = [
            p
            for p in sorted(set(committed) & set(todo))
            if p in {d for _, d in _status(repo, [repo.to_top(c) for c in committed])}
        ]
        if back:
            message = (
                f"{role}: undo the edits of a failed run ({', '.join(Path(p).name for p in back)})\n\n{why}\n\n"
                f"Workflow-Role: {role}\nWorkflow-Notify: none (the edits of a failed run, undone)\n"
            )
            entries = plumbing.hash_files(config, repo, back)
            sha = plumbing.commit(repo, entries, message, author=author(config, role), env=env, hooks=False)
            lines.append(f"committed {', '.join(back)} back (commit {sha[:10]})")
    return lines


def head(config: Config) -> str | None:
    repo = Repo.find(config)
    return repo.head() if repo is not None else None


HEAD_RE = re.compile(r"^(ref: refs/[^\s]+|[0-9a-f]{40}|[0-9a-f]{64})\n?$")


def head_file(config: Config) -> str:
    """What ``.git/HEAD`` says now, when it is sound ("" otherwise): kept so a rollback can put a
    HEAD the run replaced back."""
    path = config.project_dir / ".git" / "HEAD"
    if odd_entry(path, False) or not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")[:300]
    return text if HEAD_RE.match(text) else ""


def restore_control(config: Config, paths: list[str], role: str, why: str) -> str | None:
    """Commit the control files as the working tree has them (undoing a run's forged commits)."""
    repo = Repo(config)
    with project_lock(config) as env:
        spec = [repo.to_top(p) for p in paths]
        repo.git("add", "-A", "--", *spec, env=env)
        message = (
            f"{role}: restore the control files a failed run changed ({', '.join(paths)})\n\n{why}\n\n"
            f"Workflow-Role: {role}\nWorkflow-Notify: none (control files restored)\n"
        )
        repo.git("commit", "-q", "--no-verify", f"--author={author(config, role)}", "-m", message, "--", *spec, env=env)
        return repo.git("rev-parse", "HEAD").strip()


def planted(config: Config, before: Collection[str] | None = None) -> list[Path]:
    """What a run may have planted in ``.git`` that the owner's git would obey or write through:
    the redirect files, and symlinks among ``.git``'s own entries, its refs, logs and object
    folders — and with ``before`` (``git_entries`` when the run began), whatever it added that is
    not git's routine: a lock (every later git would stop on it), a merge, rebase or cherry-pick
    in progress (the owner's next commit would be a merge; ``git rebase --continue`` would run
    its ``exec`` lines), replace refs, alternates. Empty for a repository whose ``.git`` is not a
    folder of the project."""
    git = config.project_dir / ".git"
    if not git.is_dir() or git.is_symlink():
        return []
    out = [git / n for n in REDIRECTS if os.path.lexists(git / n)]
    out += odd_git_files(config)
    if before is not None:
        out += added(git, set(before), git_entries(config))
    if (git / "HEAD").is_file() and not HEAD_RE.match((git / "HEAD").read_text(errors="replace")[:300]):
        out.append(git / "HEAD")  # garbage: git would take the repository for no repository at all
    out += [e for e in git.iterdir() if e.is_symlink()]
    out += [git / n for n in WRITTEN_THROUGH if odd_entry(git / n, n in GIT_DIRS)]
    for sub in ("refs", "logs", "objects"):
        for here, dirs, files, fd in walk_git(git, sub):  # lists a symlinked folder, never enters it
            root = git / sub / here
            out += [root / n for n in (*dirs, *files) if _is_link(n, fd)]
    return sorted(set(out))


def gitlinks_since(config: Config, since: str | None) -> list[str]:
    """Embedded repositories (gitlinks) that commits since ``since`` added: a git that compares
    the work tree (a person's plain ``git status``) would enter them and obey their config. Read
    tree to tree (``diff-tree``: no work tree, no ``.gitmodules``); a failure is a GitError,
    never "none"."""
    repo = Repo.find(config)
    if repo is None or not since or repo.head() in (None, since):
        return []
    out = repo.git("diff-tree", "-r", "--raw", "--no-renames", "-z", since, "HEAD").split("\0")
    links = []
    for meta, path in zip(out[0::2], out[1::2], strict=False):
        fields = meta.split()
        if len(fields) >= 2 and fields[1] == "160000":
            links.append(repo.to_project(path) or path)
    return links


def staged_gitlinks(config: Config, begun: Start) -> list[str]:
    """Gitlinks the run staged in git's index (top-relative): judged before any git reads the work
    tree (``check_index`` judges the rest of what it staged)."""
    now = staged(config)
    return [p for p in index_changes(begun.staged or {}, now) if gitlink(now.get(p))]


MAX_PACKED = 16 << 20  # a packed-refs bigger than this is not kept for a rollback


def start(config: Config, repo: Repo | None = None) -> Start:
    """``.git`` as a run begins (``repo``: the project's, when the caller found it already)."""
    packed = config.project_dir / ".git" / "packed-refs"
    kept = None
    if not odd_entry(packed, False) and packed.is_file() and packed.stat().st_size <= MAX_PACKED:
        kept = packed.read_bytes()
    repo = repo or Repo.find(config)
    with project_lock(config):  # never in the middle of another run's commit: its staging is not the owner's
        index, named, marked = staged(config, repo), refs(config, repo), flagged(config, repo)
    top = repo.head() if repo is not None else None
    return Start(top or "", head_file(config), tuple(git_entries(config)), kept, index, named, marked)


def branch_of(begun: Start) -> str:
    """The branch checked out when the run began (``refs/heads/…``), or ""."""
    text = begun.head_file.strip()
    return text[5:].strip() if text.startswith("ref: ") else ""


def check_refs(config: Config, begun: Start) -> None:
    """GitError when the run moved a ref other than its branch, or marked index entries so that
    git status and diff keep quiet about them."""
    repo = Repo.find(config)
    if begun.refs is not None:
        moved = moved_refs(config, begun.refs, branch_of(begun), repo)
        if moved:
            raise GitError(
                f"the run moved {', '.join(moved)}: the owner's next checkout, merge or stash pop would take it "
                "unchecked"
            )
    if begun.flagged is not None:
        marked = sorted(set(flagged(config, repo)) - set(begun.flagged))
        if marked:
            raise GitError(f"the run marked {', '.join(marked)} assume-unchanged or skip-worktree: git would hide it")


def check_index(config: Config, begun: Start, paths: Collection[str]) -> list[str]:
    """What the run left staged in git's index beyond its own ``paths``: a gitlink (the owner's
    next ``git status`` would enter the repository and obey its config) or a control file (the
    owner's next commit would take the run's version) is a GitError; anything else is put back
    as it was, its change left in the working tree. Returns what was put back."""
    before = begun.staged or {}
    repo = Repo(config)
    owners = [repo.to_top(p) for p in control.inside(config)]
    mine = {repo.to_top(p) for p in paths}
    with project_lock(config) as env:  # another run's commit stages and commits under it: never seen half done
        now = staged(config)
        changed = [p for p in index_changes(before, now) if p not in mine or gitlink(now.get(p))]
        bad = [p for p in changed if gitlink(now.get(p)) or any(p == c or p.startswith(c + "/") for c in owners)]
        if bad:
            raise GitError(
                f"the run staged {', '.join(bad)} in git's index: the owner's next git status or commit would obey "
                "or take it"
            )
        restore_index(config, before, changed, env)
    return (
        [f"unstaged {', '.join(changed)} (the run staged it; its change stays in the working tree)"] if changed else []
    )


def neutralize(config: Config, keep: Path, since: str | None, role: str, begun: Start) -> list[str]:
    """Move what ``planted`` finds into ``keep`` (for the owner to read), set a branch the run
    broke back to where it was (``repair_head``), and commit away the gitlinks a run added (the
    embedded folders stay, untracked). Call before any git command: git refuses to run while
    they are there."""
    lines: list[str] = []
    found = planted(config, begun.entries)
    if found:
        keep.mkdir(parents=True, exist_ok=True)
        for i, path in enumerate(found):
            os.replace(path, keep / f"{i}-{path.name}")
        lines.append(f"moved {shown(config, found)} (planted in .git or where git reads) to {keep}")
        head_path = config.project_dir / ".git" / "HEAD"
        if not os.path.lexists(head_path) and begun.head_file:
            text = begun.head_file
            head_path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
            lines.append("put .git/HEAD back as it was when the run began")
    lines += repair_head(config, keep, begun)
    if found:
        index = config.project_dir / ".git" / "index"
        if not os.path.lexists(index) and Repo(config).head():
            Repo(config).git("read-tree", "HEAD")  # the planted index is gone: git's index is HEAD's again
            lines.append("rebuilt git's index from HEAD")
    if begun.staged is not None:
        with project_lock(config) as env:
            changed = index_changes(begun.staged, staged(config))
            restore_index(config, begun.staged, changed, env)
        if changed:
            lines.append(f"put git's index back as it was for {', '.join(changed)}")
    repo = Repo.find(config)
    if begun.refs is not None:
        moved = moved_refs(config, begun.refs, branch_of(begun), repo)
        if moved:
            with project_lock(config) as env:
                kept = put_refs_back(config, begun.refs, moved, env)
            lines.append(f"put back {', '.join(moved)}, which the run moved (what they named is kept under {kept})")
    if begun.flagged is not None:
        marked = sorted(set(flagged(config, repo)) - set(begun.flagged))
        if marked:
            with project_lock(config) as env:
                unflag(config, marked, env)
            lines.append(f"cleared assume-unchanged and skip-worktree on {', '.join(marked)}")
    links = gitlinks_since(config, since)
    if links:
        repo = Repo(config)
        with project_lock(config) as env:
            spec = [repo.to_top(p) for p in links]
            message = (
                f"{role}: remove the embedded repositories a failed run committed ({', '.join(links)})\n\n"
                f"Workflow-Role: {role}\nWorkflow-Notify: none (embedded repositories removed)\n"
            )
            # on a private index: ``commit -- PATH`` would take the gitlink from the working tree again,
            # and a plain commit would take the owner's staged work too
            index = repo.git_dir / f"workflow-unlink-{os.getpid()}.index"
            private = {**env, "GIT_INDEX_FILE": str(index)}
            try:
                head = repo.git("rev-parse", "HEAD").strip()
                repo.git("read-tree", head, env=private)
                repo.git("update-index", "--force-remove", "--", *spec, env=private)
                tree = repo.git("write-tree", env=private).strip()
            finally:
                index.unlink(missing_ok=True)
            who = {"GIT_AUTHOR_NAME": role, "GIT_AUTHOR_EMAIL": f"{role}@{config.domain}"}
            sha = repo.git("commit-tree", tree, "-p", head, "-m", message, env={**env, **who}).strip()
            repo.git("update-ref", "-m", "workflow: remove embedded repositories", "HEAD", sha, head, env=env)
            repo.git("update-index", "--force-remove", "--", *spec, env=env)
        lines.append(f"removed the embedded repositories {', '.join(links)} from the index (their folders stay)")
    return lines


def printable(name: str) -> str:
    """A file name fit for a commit's subject line: control characters escaped (``\\n``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _is_link(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _there(config: Config, rel: str) -> bool:
    """Whether anything is at ``rel``, reached through no symlink (a folder's ``specs/sub/`` too)."""
    try:
        return beneath.lstat(config.project_dir, rel.rstrip("/")) is not None
    except ArtifactError:
        return False


def _unlink_parents(config: Config, p: str) -> list[str]:
    """Replace each symlink among ``p``'s folders (below the project) with an empty folder: a run
    may have turned ``specs/proposed`` into a link to ``.git``, and whatever the rollback then
    wrote, removed or read there would be the owner's control files. Each step is resolved from
    the folder above it (``core.beneath``): the link itself goes, never what it names."""
    lines = []
    top = config.project_dir
    parts = Path(p).parts[:-1]
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        st = beneath.lstat(top, rel)
        if st is not None and stat.S_ISLNK(st.st_mode):
            beneath.remove(top, rel)
            beneath.mkdirs(top, rel)
            lines.append(f"replaced the symlink {rel} (planted by the run) with a folder")
        elif st is None or not stat.S_ISDIR(st.st_mode):
            break
    return lines


def _twin_elsewhere(config: Config, base: dict[str, str], p: str, going: Collection[str] = ()) -> bool:
    """Whether putting ``p`` back would leave its artifact in two state folders — a twin the same
    rollback removes (one the run created, among ``going``) is no twin: the run only renamed it."""
    a = parse_path(p, config)
    if a is None or base.get(p, ABSENT) == ABSENT or _there(config, p):
        return False
    for s in config.states:
        twin = f"{a.root}/{s}/{a.name}"
        if s != a.state and _there(config, twin):
            if not (twin in going and base.get(twin, ABSENT) == ABSENT):
                return True
    return False
