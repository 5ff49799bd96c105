"""Entry: where the ``workflow`` and ``workflow-notify`` commands start — a short command on the
fast path (``cli.fast``: no click, no configuration loaded), anything else in the full click CLI
(``cli.main``, ``cli.notify``), which is imported only then. Both run with the owner-only umask
(``core.modes``)."""

from __future__ import annotations

import os
import sys

from workflow.cli.fast import run
from workflow.core.interrupts import deferred
from workflow.core.lifeline import heed
from workflow.core.modes import owner_only


def workflow() -> None:
    owner_only()  # what this command, its servers, runs and agents write is the owner's alone
    heed(os.environ)  # started by `workflow up`: this process goes when it goes, however it goes
    code = _fast(sys.argv[1:])
    if code is None:
        with deferred():  # a Ctrl-C during the imports is raised after them, never lost in one
            from workflow.cli.main import main  # lazy: the full CLI, when the fast path cannot answer
        main()
        return
    _exit(code)


def notify() -> None:
    """The ``workflow-notify`` script: ``workflow notify``."""
    owner_only()
    code = _fast(["notify", *sys.argv[1:]])
    if code is None:
        with deferred():
            from workflow.cli.notify import main  # lazy: the full command, when the fast path cannot answer
        main()
        return
    _exit(code)


def _fast(argv: list[str]) -> int | None:
    try:
        return run(argv, os.environ)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _exit(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)  # as cli.base.run_script: nothing left to tear down
