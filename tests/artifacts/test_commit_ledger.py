"""The ledger of our own commits (``artifacts.plumbing``) holds a commit before HEAD names it.

A run checks the commits made since it began for ones "made as someone else" (``history``),
leaving out those the ledger holds. Two runs of different roles run at once: when one run's move
became HEAD before it was noted, the other run, checking at that moment, failed as if it had
forged a commit (seen in the person pipeline: "the run made commits as someone else"). Git's
reference-transaction hook runs as HEAD moves: there, the new commit must be in the ledger."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from helpers.git import git_project, sh
from workflow.artifacts import edits, history

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


def test_a_run_checking_its_commits_never_takes_another_runs_commit_made_meanwhile_for_its_own(tmp_path: Path) -> None:
    # CI: skeleton-writer's run failed "made commits as someone else (6cdc6705e0 (implementer …))":
    # the check read the ledger, the implementer's run committed (ledger, then HEAD), and the
    # check's git log then showed a commit its ledger read had not held.
    p = git_project(tmp_path / "proj")
    config = p.app.config
    since = sh(p, "git", "rev-parse", "HEAD").stdout.strip()
    stop = threading.Event()
    made: list[str] = []

    def implementer() -> None:  # another role's run, committing as fast as it can
        for i in range(400):
            if stop.is_set():
                return
            (p.dir / "specs" / "proposed" / f"part-{i}.md").write_text(f"# Part {i}\n")
            done = edits.commit(config, "implementer", [f"specs/proposed/part-{i}.md"], "edit")
            made.append(str(done.sha))

    other = threading.Thread(target=implementer)
    other.start()
    try:
        checks, end = 0, time.monotonic() + 6  # the old order was caught within ~13 commits (2.7 s), quiet
        while len(made) < 30 and other.is_alive() and time.monotonic() < end:
            assert history.foreign_commits(config, since, "skeleton-writer") == [], f"after {len(made)} commits"
            checks += 1
    finally:
        stop.set()
        other.join(timeout=60)
    assert checks >= 10 and len(made) >= 5, (checks, len(made))
