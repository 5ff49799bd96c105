"""Hook run: ``workflow hooks run HOOK``, as git calls it on every commit, answered without click
or the App when it can be.

pre-commit needs only the configuration and git; post-commit needs the App and a transport only
when it has something to send (``artifacts.hooks.quiet``), which no commit a run or ``workflow
move`` makes has. So both are answered here, from the full command's own functions, and
``answer`` returns None for anything else — post-commit with a move to announce or mail queued,
a config the full command would refuse or warn about, an unknown hook —, when the full command
runs and decides. A commit then costs git two short interpreter starts, not two CLI starts
(docs/performance.md).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from workflow.artifacts.gitrepo import Repo
from workflow.artifacts.hooks import HOOKS, absolutize_env, quiet, refuse
from workflow.bridges.sections import SECTIONS
from workflow.core import ownership
from workflow.core.config import load_config
from workflow.core.errors import WorkflowError


def answer(args: Sequence[str], config: str | None, env: Mapping[str, str]) -> int | None:
    """The exit code of ``hooks run ARGS`` with root option ``--config CONFIG``; None: run it in full."""
    if len(args) != 1 or args[0] not in HOOKS:
        return None
    hook = args[0]

    def say(text: str) -> None:
        print(f"workflow {hook}: {text}", file=sys.stderr)

    absolutize_env()
    try:
        loaded = load_config(Path(config) if config else None, env=env, plugins=SECTIONS)
        ownership.check(loaded)  # as the full command's App: the mail root is this project's
        repo = Repo(loaded)
        if hook == "pre-commit":
            return refuse(loaded, repo, say)
        return 0 if quiet(loaded, repo) else None
    except (WorkflowError, OSError):
        return None  # the full command says what is wrong, as a warning that keeps the commit
