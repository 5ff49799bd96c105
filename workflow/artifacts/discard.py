"""Discard: what a failed run's rollback throws away, kept on ``refs/workflow/discarded/ROLE`` — up to a cap.

A shell agent's edits cannot be told from a person's made while it runs, so before a rollback
puts the artifact roots back, what it discards is kept in a commit off every branch (``git show
refs/workflow/discarded/ROLE:PATH`` brings a file back). Only so much: a failed run could
otherwise grow the owner's repository by whatever it wrote, every time it fails. A file larger
than ``KEEP_FILE``, or past ``KEEP_TOTAL`` for the rollback, is named in the run's log as dropped
and is never written into the object store.
"""

from __future__ import annotations

import os
import stat

from workflow.artifacts import plumbing
from workflow.artifacts.gitrepo import Repo
from workflow.core import beneath
from workflow.core.config import Config

KEEP_FILE = 1 << 20  # bytes: a discarded file larger than this is named in the log, not kept
KEEP_TOTAL = 8 << 20  # bytes kept for one rollback in all; past it, files are named and dropped


def keep(
    config: Config, repo: Repo, base: dict[str, str], paths: list[str], role: str, why: str, env: dict[str, str]
) -> list[str]:
    """Keep the current contents of the regular files among ``paths`` that differ from ``base`` in
    a commit on ``refs/workflow/discarded/ROLE`` (parent: that ref's last one), off every branch —
    up to ``KEEP_FILE`` bytes a file and ``KEEP_TOTAL`` a rollback: a failed run's 300 MB is named
    and dropped, never kept alive in the owner's repository."""
    small, dropped, total = [], [], 0
    for p in paths:
        st = beneath.lstat(config.project_dir, p)
        if st is None or not stat.S_ISREG(st.st_mode):
            continue
        if st.st_size > KEEP_FILE or total + st.st_size > KEEP_TOTAL:
            dropped.append(f"{p} ({st.st_size} bytes)")
            continue
        total += st.st_size
        small.append(p)
    entries = plumbing.hash_files(config, repo, small)
    kept = [(repo.to_top(p), e.sha) for p, e in entries.items() if e is not None and e.sha != base.get(p, "")]
    lines = []
    if dropped:
        lines.append(
            f"dropped {', '.join(dropped)} without keeping it: a rollback keeps at most {KEEP_FILE} bytes a file, "
            f"{KEEP_TOTAL} in all"
        )
    if not kept:
        return lines
    ref = f"refs/workflow/discarded/{role}"
    index = repo.git_dir / f"workflow-discard-{os.getpid()}.index"
    tree_env = {**env, "GIT_INDEX_FILE": str(index)}
    try:
        info = "".join(f"100644 {sha}\t{path}\0" for path, sha in kept)
        repo.git("update-index", "--add", "-z", "--index-info", input=info, env=tree_env)
        tree = repo.git("write-tree", env=tree_env).strip()
    finally:
        index.unlink(missing_ok=True)
    parent = repo.git("rev-parse", "--verify", "-q", ref, check=False).strip()
    message = f"{role}: what a failed run's rollback discarded\n\n{why}\n"
    sha = repo.git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=env).strip()
    repo.git("update-ref", ref, sha, env=env)
    names = ", ".join(repo.to_project(p) or p for p, _ in kept)
    return [*lines, f"kept {names} as they were in {ref} ({sha[:10]}; `git show {ref}:PATH` brings one back)"]
