"""Hooks: installing git's pre-commit and post-commit, and what either decides without an App.

*pre-commit* refuses a commit that leaves an artifact in two state folders or moves one along
a transition the graph does not allow, printing the rule. *post-commit* (``artifacts.announce``) tells of every move
once; ``quiet`` says, from git and the state dir alone, when it has nothing to do: nothing is
queued in the outbox and the commit moved nothing, or says it told already. Every commit a run
or ``workflow move`` makes is such a commit, so git's hooks answer it without loading the App
(``cli.hookrun``: about half a CLI start each).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from workflow.artifacts import transitions
from workflow.artifacts.gitrepo import Move, Repo, artifacts_in, moves
from workflow.core.config import Config
from workflow.core.errors import WorkflowError
from workflow.core.locate import by_key, two_folders
from workflow.delivery import outbox

HOOKS = ("pre-commit", "post-commit")
MARKER = "# workflow-mail hook"


class Installed(NamedTuple):
    hook: str
    path: Path
    action: str  # "installed" | "up to date" | "installed (kept your hook as NAME)"


def script(hook: str, python: str, config_rel: str) -> str:
    """The hook file: runs a hook already there first, then ours; never blocks on a missing install."""
    return f"""#!/bin/sh
{MARKER} (installed by `workflow hooks install`; reinstalling overwrites edits).
# A hook that was here before is kept as {hook}.local and runs first.
here=$(dirname "$0")
if [ -x "$here/{hook}.local" ]; then "$here/{hook}.local" "$@" || exit $?; fi
top=$(git rev-parse --show-toplevel) || exit 0
cfg="$top/{config_rel}"
py='{python}'
# -P: the working tree (an agent's writing) never shadows the installed workflow package
if [ -x "$py" ] && "$py" -P -c 'import workflow' 2>/dev/null; then
  exec "$py" -P -m workflow --config "$cfg" hooks run {hook} "$@"
elif command -v workflow >/dev/null 2>&1; then
  exec workflow --config "$cfg" hooks run {hook} "$@"
fi
echo "workflow-mail: {hook} hook skipped: the workflow command is not installed (pip install workflow-mail)" >&2
exit 0
"""


def install(config: Config, repo: Repo) -> list[Installed]:
    """Write both hooks; idempotent (an unchanged hook file is not rewritten)."""
    cfg = config.path or (config.project_dir / "workflow.toml")
    rel = Path(os.path.relpath(cfg.resolve(), repo.top)).as_posix()
    repo.hooks_dir.mkdir(parents=True, exist_ok=True)
    out: list[Installed] = []
    for hook in HOOKS:
        path = repo.hooks_dir / hook
        text = script(hook, sys.executable, rel)
        action = "installed"
        if path.exists():
            old = path.read_text(encoding="utf-8", errors="replace")
            if old == text and os.access(path, os.X_OK):
                out.append(Installed(hook, path, "up to date"))
                continue
            if MARKER not in old:
                kept = path.with_name(f"{hook}.local")
                if kept.exists():
                    raise WorkflowError(f"{path} is not ours and {kept.name} exists too; merge them by hand")
                path.rename(kept)
                action = f"installed (your hook now runs first as {kept.name})"
        tmp = path.with_name(f".{hook}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o755)
        tmp.rename(path)
        out.append(Installed(hook, path, action))
    written = [i.path for i in out if i.action != "up to date"]
    written += [i.path.with_name(f"{i.hook}.local") for i in out if ".local" in i.action]
    from workflow.artifacts import trust  # lazy: git's hooks import this module on every commit

    project = config.project_dir.resolve()
    trust.approve(
        config, [p.resolve().relative_to(project).as_posix() for p in written if project in p.resolve().parents]
    )
    return out


def installed(repo: Repo) -> list[str]:
    """Which of our hooks are missing."""
    missing = []
    for hook in HOOKS:
        p = repo.hooks_dir / hook
        if not p.exists() or MARKER not in p.read_text(encoding="utf-8", errors="replace"):
            missing.append(hook)
    return missing


def absolutize_env() -> None:
    """Git may hand hooks relative GIT_DIR/GIT_INDEX_FILE; we run git from other directories."""
    for var in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        v = os.environ.get(var)
        if v and not os.path.isabs(v):
            os.environ[var] = os.path.abspath(v)


# ------------------------------------------------------------------ pre-commit


def pre_commit(config: Config, repo: Repo) -> list[str]:
    """Problems with the staged commit, one line each (empty: the commit may proceed)."""
    staged = repo.staged()
    problems = [
        transitions.refusal(config, m.after.path, m.before.state, m.after.state)
        for m in moves(staged, config)
        if not transitions.allowed(config, m.before.state, m.after.state)
    ]
    touched = {a.key for a in artifacts_in((c.path for c in staged if c.status != "D"), config)}
    if touched:
        index = by_key(artifacts_in(repo.tracked(None, config.artifact_roots), config))
        for key in sorted(touched):
            copies = index.get(key, [])
            if len(copies) > 1:
                problems.append(two_folders(copies))
    return problems


def refuse(config: Config, repo: Repo, say: Callable[[str], None]) -> int:
    """pre-commit's verdict, said: each problem with the staged commit, then 1; 0 when it may proceed."""
    problems = pre_commit(config, repo)
    for p in problems:
        say(p)
    if problems:
        say("commit refused (fix the above; `git commit --no-verify` skips this check)")
        return 1
    return 0


def trailer(message: str, name: str) -> str | None:
    for line in reversed(message.strip().splitlines()):
        k, sep, v = line.partition(":")
        if sep and k.strip().lower() == name.lower():
            return v.strip()
    return None


def told(config: Config) -> set[str]:
    """The keys of the moves post-commit has told of (``ledger_key``), from the state dir's ledger."""
    try:
        return set(config.state.notified.read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return set()


def ledger_key(parent: str, move: Move) -> str:
    """A move's line in the ledger: the commit it was made on, the artifact and the transition."""
    return f"{parent} {move.after.glob} {move.before.state}->{move.after.state}"


def quiet(config: Config, repo: Repo, sha: str = "HEAD") -> bool:
    """Whether post-commit has nothing to do for commit ``sha``: nothing waits in the outbox, and
    the commit moved no artifact, its ``Workflow-Notify`` trailer says it told already, or the
    ledger has every move it made."""
    if outbox.waiting(config):
        return False
    found = moves(repo.committed(sha), config)
    if not found or trailer(repo.message(sha), "Workflow-Notify") is not None:
        return True
    parent = repo.parent(sha)
    done = told(config)
    return all(ledger_key(parent, m) in done for m in found)
