"""Movers: who last moved each artifact, and when, read from the moves' commits.

A move is one commit with a ``Workflow-Transition: FROM -> TO`` trailer and a ``Workflow-Role``
trailer (``artifacts.move``). That commit is the truth about where an artifact is and who put it
there, over any older mail claiming a state: the board (``artifacts.board``) and ``workflow
doctor`` raise no "claims" alarm for mail older than the move, and a card's "by" names the mover.
One ``git log`` per HEAD: the answer is kept until HEAD changes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NamedTuple

from workflow.artifacts import plumbing
from workflow.artifacts.gitrepo import Repo
from workflow.core.config import Config
from workflow.core.errors import GitError
from workflow.core.locate import Artifact, parse_path
from workflow.policy.guardrails import Stay


class Moved(NamedTuple):
    role: str  # the Workflow-Role of the move's commit
    time: int  # the commit's time (seconds)
    state: str  # the state it moved the artifact to


Movers = Mapping[tuple[str, str], Moved]  # an artifact's identity (root, name) → its last move

_kept: dict[tuple[str, str], Movers] = {}  # (git dir, HEAD) → the movers then
_lock = threading.Lock()


def last_moves(config: Config, repo: Repo | None = None) -> Movers:
    """Each artifact's last committed move; empty outside a repository or before a first commit."""
    try:
        repo = repo or Repo.find(config)
        head = repo.head() if repo is not None else None
    except GitError:
        return {}
    if repo is None or head is None:
        return {}
    key = (str(repo.git_dir), f"{head}:{config.project_dir}")
    with _lock:
        found = _kept.get(key)
    if found is not None:
        return found
    try:
        found_log = _log(repo, "--grep=^Workflow-Transition: ", head)
    except GitError:
        return {}
    moved: dict[tuple[str, str], Moved] = {}
    for _, when, role, transitions in found_log:
        for t in transitions:
            _, arrow, dst = t.partition(" -> ")
            a = parse_path(dst.strip(), config) if arrow else None
            if a is not None and a.key not in moved:  # newest first: the first seen is the last move
                moved[a.key] = Moved(role, when, a.state)
    with _lock:
        if len(_kept) > 16:
            _kept.clear()
        _kept[key] = moved
    return moved


def stay(config: Config, artifact: Artifact, state: str, depth: int = 20) -> Stay | None:
    """``artifact``'s last stay in ``state``, read back from where it is now
    (``policy.guardrails.History``): only when every commit that touched it since it was moved
    there, and that move, are commits our own code made (a trailer is anyone's to write, a
    commit's time anyone's to set by amending it; a plain ``git mv`` leaves no move of ours)."""
    repo = Repo.find(config)
    if repo is None or repo.head() is None:
        return None
    spec = f":(glob){repo.to_top(artifact.root)}/*/{artifact.name}"
    try:
        found_log = _log(repo, f"-{depth}", "HEAD", "--", spec)
    except GitError:
        return None
    mine = plumbing.ours(config)
    at, left = artifact.state, 0  # walking back: where it was after each commit
    for sha, when, role, transitions in found_log:
        if sha not in mine:
            return None
        for t in transitions:
            src, arrow, dst = t.partition(" -> ")
            a, b = parse_path(dst.strip(), config), parse_path(src.strip(), config)
            if not arrow or a is None or b is None or a.key != artifact.key:
                continue
            if a.state != at:
                return None  # the moves do not chain: something else moved it
            if a.state == state and left:
                return Stay(when, left, role)
            if b.state == state:
                left = when
            at = b.state
            break
    return None


def _log(repo: Repo, *args: str) -> list[tuple[str, int, str, list[str]]]:
    """``git log ARGS``, newest first: each commit's id, time, Workflow-Role and its
    Workflow-Transition trailers (``FROM -> TO``)."""
    sep, end = "\x1f", "\x1e"
    fmt = f"%H %ct{sep}%(trailers:key=Workflow-Role,valueonly,separator=%x20){sep}"
    fmt += f"%(trailers:key=Workflow-Transition,valueonly,separator=%x1d){end}"
    out: list[tuple[str, int, str, list[str]]] = []
    for entry in repo.git("log", f"--format={fmt}", *args).split(end):
        parts = entry.strip("\n").split(sep)
        sha, _, when = parts[0].strip().partition(" ")
        if len(parts) == 3 and when.isdigit():
            out.append((sha, int(when), parts[1].strip(), [t.strip() for t in parts[2].split("\x1d")]))
    return out


def settled(moved: Moved | None, state: str, claimed_at: int) -> bool:
    """Whether a committed move into ``state`` is newer than (or as new as) a claim made at
    ``claimed_at``: then the claim is history, not a disagreement."""
    return moved is not None and moved.state == state and moved.time >= claimed_at
