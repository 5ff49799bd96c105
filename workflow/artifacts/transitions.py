"""Transitions: which state-folder moves are legal, and the words a commit message uses for them.

The graph comes from ``[artifacts] transitions`` (default: proposed→todo, todo→doing,
doing→blocked, blocked→doing, doing→done, and any state→proposed for a revision). Staying in
the same folder is never a move: a rejection leaves the artifact where it is.
"""

from __future__ import annotations

from workflow.core.config import Config

VERBS = {
    ("proposed", "todo"): "approve",
    ("todo", "doing"): "start",
    ("doing", "blocked"): "block",
    ("blocked", "doing"): "unblock",
    ("doing", "done"): "finish",
}


def allowed(config: Config, src: str, dst: str) -> bool:
    return (src, dst) in config.transitions


def targets(config: Config, src: str) -> list[str]:
    """The states ``src`` may move to, in the configured state order."""
    return [s for s in config.states if (src, s) in config.transitions]


def verb(src: str, dst: str) -> str:
    if dst == "proposed":
        return "revise"
    return VERBS.get((src, dst), "move")


def refusal(config: Config, path: str, src: str, dst: str) -> str:
    """The text that refuses an illegal move and lists the legal ones."""
    legal = targets(config, src)
    options = ", ".join(f"{src} → {s}" for s in legal) if legal else "none"
    return f"illegal transition {src} → {dst} for {path}; legal from {src}/: {options} ([artifacts] transitions)"


def commit_subject(role: str, src: str, dst: str, stem: str) -> str:
    """``spec-reviewer: approve user-auth (proposed → todo)``."""
    return f"{role}: {verb(src, dst)} {stem} ({src} → {dst})"
