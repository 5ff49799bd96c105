"""Artifacts: where each artifact is now — the state folder it sits in *is* its state.

An artifact lives at ``ROOT/STATE/NAME`` (``specs/proposed/user-auth.md``): ROOT is one of the
configured artifact roots, STATE one of the configured states, NAME the path below the state
folder. Its identity is (ROOT, NAME), so ``specs/*/user-auth.md`` — or the old path
``specs/proposed/user-auth.md`` after a move — names the same artifact wherever it is now.
``locate`` is the one glob helper used by the inbox, run-role, the server and the git tools.
"""

from __future__ import annotations

import os
from stat import S_ISREG

from workflow.core import beneath
from workflow.core.errors import ArtifactError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import NamedTuple, Protocol

    from workflow.core.config import Config

    class Layout(Protocol):
        """Where artifacts live: a Config, or a short command's snapshot of one."""

        @property
        def project_dir(self) -> os.PathLike[str] | str: ...
        @property
        def artifact_roots(self) -> tuple[str, ...]: ...
        @property
        def states(self) -> tuple[str, ...]: ...
else:
    from workflow.core.records import NamedTuple


def has_glob(text: str) -> bool:
    """Whether ``text`` holds a glob character (``*``, ``?``, ``[``)."""
    return "*" in text or "?" in text or "[" in text


def literal(pattern: str) -> str:
    """The longest run of a pattern without glob characters."""
    for c in "?[":
        pattern = pattern.replace(c, "*")
    return max(pattern.split("*"), key=len)


def matches(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase``, without importing it for a pattern with no glob in it."""
    if pattern == "*":
        return True
    if not has_glob(pattern):
        return name == pattern
    import fnmatch  # lazy: start-up time; only a glob needs it

    return fnmatch.fnmatchcase(name, pattern)


class Artifact(NamedTuple):
    """One artifact file where it is now."""

    root: str
    state: str
    name: str  # path below the state folder, posix

    @property
    def path(self) -> str:
        return f"{self.root}/{self.state}/{self.name}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.root, self.name)

    @property
    def glob(self) -> str:
        return f"{self.root}/*/{self.name}"

    @property
    def stem(self) -> str:
        base = self.name.rsplit("/", 1)[-1]
        dot = base.rfind(".")
        return base[:dot] if 0 < dot < len(base) - 1 else base

    def moved(self, state: str) -> Artifact:
        return self._replace(state=state)


class Ref(NamedTuple):
    """A reference split at the state folder: ``specs`` / ``*`` / ``user-auth.md``."""

    root: str
    state: str  # a state, or a glob over states
    name: str  # may hold glob characters


def split_ref(ref: str, config: Layout) -> Ref | None:
    """Split ``ROOT/STATE/NAME`` (any of them may be globs); None when it is not under a root."""
    ref = ref.strip()
    if ref.startswith("/"):
        return None
    parts = [p for p in ref.split("/") if p not in ("", ".")]
    if len(parts) < 3 or parts[0] not in config.artifact_roots or ".." in parts:
        return None
    return Ref(parts[0], parts[1], "/".join(parts[2:]))


def parse_path(path: str, config: Layout) -> Artifact | None:
    """The artifact a concrete repository path names, or None (not under a root and a state)."""
    ref = split_ref(path, config)
    if ref is None or ref.state not in config.states or has_glob(ref.name) or _hidden(ref.name):
        return None
    return Artifact(ref.root, ref.state, ref.name)


def _hidden(name: str) -> bool:
    return any(p.startswith(".") for p in name.split("/"))


def _is_file(config: Layout, rel: str) -> bool:
    """A regular file at the project path ``rel``, reached through no symlink (``core.beneath``:
    resolved from the project's folder fd, so a folder swapped for a link meanwhile never counts)."""
    try:
        return beneath.is_file(config.project_dir, rel)
    except ArtifactError:
        return False


def _plain(name: str, folder: int) -> bool:
    try:
        return S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False  # gone meanwhile


def scan(config: Config, roots: Iterable[str] | None = None) -> list[Artifact]:
    """Every artifact file in the working tree, by root, state and name (dotfiles and symlinks
    skipped: no symlink is followed). Each state folder is walked from its fd (``beneath.walk``),
    so a folder an agent swaps for a link meanwhile never lists what the link names, and no
    deeper than ``beneath.MAX_DEPTH`` folders."""
    out: list[Artifact] = []
    base = config.project_dir
    for root in roots or config.artifact_roots:
        for state in config.states:
            try:
                for rel, dirnames, filenames, fd in beneath.walk(base, [root, state]):
                    dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                    for f in sorted(filenames):
                        if f.startswith(".") or not _plain(f, fd):
                            continue
                        out.append(Artifact(root, state, f"{rel}/{f}" if rel else f))
            except (ArtifactError, FileNotFoundError):
                continue
    return out


def locate(ref: str, config: Layout, artifacts: Sequence[Artifact] | None = None) -> list[Artifact]:
    """Where the artifacts a reference names are now.

    A path or glob under a root matches by name in every state folder whose name matches its
    state part; a concrete old path (``specs/proposed/x.md`` after x moved) therefore finds the
    artifact in its new folder. ``artifacts`` (a ``scan``) can be passed in when locating many.
    """
    split = split_ref(ref, config)
    if split is None:
        return []
    state_pattern = split.state if has_glob(split.state) else "*"
    name_is_glob = has_glob(split.name)
    if artifacts is None and not name_is_glob:
        # A concrete name: one stat per state folder instead of walking the tree (the server's path).
        if _hidden(split.name):
            return []
        return [
            Artifact(split.root, s, split.name)
            for s in config.states
            if matches(s, state_pattern) and _is_file(config, f"{split.root}/{s}/{split.name}")
        ]
    pool = artifacts if artifacts is not None else scan(config, [split.root])  # type: ignore[arg-type]
    return [a for a in pool if a.root == split.root and matches(a.state, state_pattern) and matches(a.name, split.name)]


class Pool:
    """A scan of the working tree for locating many references: ``locate`` answers as the function
    does, a concrete name by one look-up of its identity instead of a pass over every artifact."""

    def __init__(self, config: Layout, artifacts: Sequence[Artifact]) -> None:
        self.config = config
        self.artifacts = artifacts
        self._by_key = by_key(artifacts)

    def locate(self, ref: str) -> list[Artifact]:
        split = split_ref(ref, self.config)
        if split is None or has_glob(split.name):
            return locate(ref, self.config, self.artifacts) if split is not None else []
        state_pattern = split.state if has_glob(split.state) else "*"
        return [a for a in self._by_key.get((split.root, split.name), ()) if matches(a.state, state_pattern)]


def by_key(artifacts: Iterable[Artifact]) -> dict[tuple[str, str], list[Artifact]]:
    out: dict[tuple[str, str], list[Artifact]] = {}
    for a in artifacts:
        out.setdefault(a.key, []).append(a)
    return out


def duplicates(artifacts: Iterable[Artifact]) -> list[list[Artifact]]:
    """Artifacts found in more than one state folder."""
    return [v for v in by_key(artifacts).values() if len(v) > 1]


def find(arg: str, config: Config) -> Artifact:
    """The one artifact a user means by a path, glob, file name or stem; refuses naming why."""
    arg = arg.strip()
    if not arg:
        raise ArtifactError("no artifact given")
    everything = scan(config)
    if "/" in arg:
        found = locate(arg, config, everything)
        if not found and split_ref(arg, config) is None:
            roots = ", ".join(f"{r}/" for r in config.artifact_roots)
            raise ArtifactError(
                f"{arg}: not under an artifact root ({roots}); expected ROOT/STATE/NAME like specs/proposed/x.md"
            )
    else:
        found = [a for a in everything if a.name == arg or a.name.rsplit("/", 1)[-1] == arg or a.stem == arg]
    if not found:
        where = ", ".join(f"{r}/{{{','.join(config.states)}}}/" for r in config.artifact_roots)
        raise ArtifactError(f"artifact {arg} not found in {where}{did_you_mean(arg, everything)}")
    groups = by_key(found)
    if len(groups) > 1:
        names = ", ".join(sorted(v[0].glob for v in groups.values()))
        raise ArtifactError(f"{arg} is ambiguous: it names {names}; give the path")
    (only,) = groups.values()
    if len(only) > 1:
        raise ArtifactError(two_folders(only))
    return only[0]


def did_you_mean(arg: str, artifacts: Iterable[Artifact]) -> str:
    """``; did you mean search?`` for an artifact name, stem or path that names nothing: the
    artifacts whose stem is close to its stem ("" when none is). ``find`` (``workflow move``,
    ``status``) and ``workflow-notify`` say it alike."""
    import difflib  # lazy: start-up time; only a mistake needs a suggestion

    stems = sorted({a.stem for a in artifacts})
    close = difflib.get_close_matches(arg, stems, n=2, cutoff=0.6)
    if not close:
        stem = arg.rsplit("/", 1)[-1]
        stem = stem.rsplit(".", 1)[0] if "." in stem[1:] else stem
        close = difflib.get_close_matches(stem, stems, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def two_folders(copies: Sequence[Artifact]) -> str:
    folders = ", ".join(f"{a.root}/{a.state}/" for a in copies)
    return f"artifact {copies[0].glob} is in {len(copies)} state folders ({folders}); keep one (git rm the stale copy)"


class Resolver:
    """Where the artifacts mail names are now (cached per ref): a concrete path by one stat per
    state folder, a glob from one scan of the working tree, made when the first glob asks."""

    def __init__(self, config: Layout) -> None:
        self.config = config
        self._scanned: list[Artifact] | None = None
        self._cache: dict[str, list[str]] = {}

    @property
    def artifacts(self) -> list[Artifact]:
        if self._scanned is None:
            self._scanned = scan(self.config)  # type: ignore[arg-type]
        return self._scanned

    def now(self, ref: str) -> list[str]:
        if ref not in self._cache:
            split = split_ref(ref, self.config)
            pool = self.artifacts if split is not None and has_glob(split.name) else None
            self._cache[ref] = [a.path for a in locate(ref, self.config, pool)]
        return self._cache[ref]
