"""The ledger of our own commits (``artifacts.plumbing``) holds a commit before HEAD names it.

A run checks the commits made since it began for ones "made as someone else" (``history``),
leaving out those the ledger holds. Two runs of different roles run at once: when one run's move
became HEAD before it was noted, the other run, checking at that moment, failed as if it had
forged a commit (seen in the person pipeline: "the run made commits as someone else"). Git's
reference-transaction hook runs as HEAD moves: there, the new commit must be in the ledger."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.git import git_project, sh

HOOK = """#!/bin/sh
[ "$1" = committed ] || exit 0
while read old new ref; do
  [ "$ref" = HEAD ] || [ "$ref" = "$(git symbolic-ref -q HEAD)" ] || continue
  if grep -qx "$new" "$LEDGER"; then echo "noted $new" >> "$OUT"; else echo "unnoted $new" >> "$OUT"; fi
done
"""


def test_our_commit_is_in_the_ledger_when_head_moves_to_it(tmp_path: Path) -> None:
    p = git_project(tmp_path / "proj")
    hook = p.dir / ".git" / "hooks" / "reference-transaction"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    out = tmp_path / "seen"
    ledger = p.app.config.state.commits
    env = {**os.environ, "LEDGER": str(ledger), "OUT": str(out)}
    r = p.run("move", "specs/proposed/user-auth.md", "todo", "--as", "spec-reviewer", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    head = sh(p, "git", "rev-parse", "HEAD").stdout.strip()
    seen = out.read_text().split("\n") if out.exists() else []
    assert f"noted {head}" in seen, seen
    assert not [line for line in seen if line.startswith("unnoted")], seen
