"""Versions: an artifact's committed history, across its moves between state folders, read with git.

An artifact is its identity (root, name): a move from ``proposed/`` to ``todo/`` is a commit
deleting one path and adding the other, so the history of ``specs/*/x.md`` is one ``git log``
over the artifact's path in every state folder (literal pathspecs: a name's glob characters
match nothing else), newest first. Each version is the commit, its time, its ``Workflow-Role``
trailer, its subject, where the artifact was after it and its blob id there (what a message's
``X-Artifact-Version`` records, so a reviewed version is found among them), and the
``Workflow-Transition`` naming it when the commit is a move. Git runs only through ``gitcmd``
(``Repo.git``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from workflow.artifacts.gitrepo import Repo
from workflow.core.config import Config
from workflow.core.errors import GitError
from workflow.core.locate import Artifact, parse_path

MOST = 500  # versions read at most (newest first)
HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REC, _SEP, _LIST = "\x1e", "\x1f", "\x1d"
_FORMAT = (
    f"--format={_REC}%H{_SEP}%ct{_SEP}%(trailers:key=Workflow-Role,valueonly,separator=%x20){_SEP}"
    f"%(trailers:key=Workflow-Transition,valueonly,separator=%x1d){_SEP}%s"
)


class Version(NamedTuple):
    """The artifact as one commit left it."""

    commit: str
    time: int  # the commit's time (seconds)
    role: str  # its Workflow-Role trailer ("" when it has none)
    subject: str
    path: str  # project-relative, where the artifact was after the commit ("" when it removed it)
    blob: str  # its blob id there ("" when removed)
    moved: str  # the commit's Workflow-Transition naming this artifact ("FROM -> TO"), "" when no move


def history(config: Config, artifact: Artifact, most: int = MOST) -> list[Version]:
    """The commits that changed ``artifact`` in any state folder, newest first (none outside a
    repository or before a first commit)."""
    repo = Repo.find(config)
    if repo is None:
        return []
    specs = [f":(literal){repo.to_top(artifact.moved(s).path)}" for s in config.states]
    try:
        out = repo.git("log", "-z", "--raw", "--no-abbrev", "--no-renames", f"-n{most}", _FORMAT, "HEAD", "--", *specs)
    except GitError:  # no commit yet
        return []
    found: list[Version] = []
    for record in out.split(_REC):
        v = _version(record, repo, config, artifact)
        if v is not None:
            found.append(v)
    return found


def _version(record: str, repo: Repo, config: Config, artifact: Artifact) -> Version | None:
    head, _, raw = record.partition("\0")
    fields = head.split(_SEP, 4)
    if len(fields) != 5 or not HEX.fullmatch(fields[0]) or not fields[1].isdigit():
        return None  # not a record git wrote (a subject cannot forge one: its hash must lead it)
    commit, when, role, transitions, subject = fields
    items = raw.split("\0")
    path = blob = ""
    for meta, name in zip(items[0::2], items[1::2], strict=False):
        parts = meta.strip().split()
        if len(parts) < 5:
            continue
        where = repo.to_project(name)
        a = parse_path(where, config) if where else None
        if a is None or a.key != artifact.key or parts[4].startswith("D"):
            continue
        path, blob = a.path, parts[3]
    moved = ""
    for t in transitions.split(_LIST):
        src, arrow, dst = t.strip().partition(" -> ")
        a = parse_path(dst.strip(), config) if arrow else None
        if a is not None and a.key == artifact.key:
            moved = f"{src.strip()} -> {dst.strip()}"
    return Version(commit, int(when), role.strip(), subject, path, blob, moved)


def blob_bytes(config: Config, blob: str) -> bytes | None:
    """The bytes of a blob of the project's repository, None when it is not one there."""
    if not HEX.fullmatch(blob):
        return None
    repo = Repo.find(config)
    if repo is None:
        return None
    try:
        text = repo.git("cat-file", "blob", blob)
    except GitError:
        return None
    return text.encode("utf-8", "surrogateescape")
