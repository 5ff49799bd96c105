"""Files: a small file is replaced whole or not at all, and a planted link is never followed."""

from __future__ import annotations

import os
from pathlib import Path

from workflow.core.files import write_atomic


def test_write_replaces_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "d" / "state.json"
    write_atomic(target, "first")
    write_atomic(target, b"second", mode=0o600)
    assert target.read_text() == "second"
    assert os.listdir(target.parent) == ["state.json"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    target = tmp_path / "artifact.md"
    target.symlink_to(outside)
    write_atomic(target, "new text")
    assert outside.read_text() == "keep me"
    assert not target.is_symlink() and target.read_text() == "new text"
