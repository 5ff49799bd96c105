"""Locate: a Pool answers every reference as ``locate`` over the same scan does."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from workflow.core.locate import Artifact, Pool, locate


class Layout(NamedTuple):
    project_dir: Path
    artifact_roots: tuple[str, ...]
    states: tuple[str, ...]


def test_a_pool_locates_as_locate_does() -> None:
    layout = Layout(Path("/nonexistent"), ("specs", "docs"), ("proposed", "todo", "done"))
    artifacts = [
        Artifact("specs", "proposed", "a.md"),
        Artifact("specs", "todo", "b.md"),
        Artifact("specs", "done", "b.md"),  # in two folders
        Artifact("specs", "todo", "sub/c.md"),
        Artifact("docs", "todo", "a.md"),
    ]
    pool = Pool(layout, artifacts)
    refs = [
        "specs/proposed/a.md",
        "specs/todo/a.md",  # an old path: found where it is now
        "specs/*/b.md",
        "specs/t*/b.md",  # a glob over states
        "specs/*/sub/c.md",
        "specs/*/*.md",  # a glob in the name
        "docs/*/a.md",
        "specs/*/missing.md",
        "elsewhere/todo/a.md",  # not under a root
        "/specs/todo/a.md",
    ]
    for ref in refs:
        assert pool.locate(ref) == locate(ref, layout, artifacts), ref
    assert [a.state for a in pool.locate("specs/*/b.md")] == ["todo", "done"]
    assert pool.locate("specs/t*/b.md") == [Artifact("specs", "todo", "b.md")]
