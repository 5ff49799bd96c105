"""Lifeline: a child process that dies with its parent, so nothing a server started outlives it.

``workflow up`` starts smtpd and the cockpit as children with ``WORKFLOW_DIE_WITH`` set to its
pid; the ``workflow`` entry point heeds it (``heed``) before anything else, and smtpd's forked
workers do the same for their server (``die_with_parent``). Linux's ``PR_SET_PDEATHSIG`` sends
SIGTERM when the parent dies, however it dies (a Ctrl-C at any instant, SIGKILL), and each stops
as it does on SIGTERM.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import MutableMapping

ENV = "WORKFLOW_DIE_WITH"
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM this process when ``parent`` (the pid that started it, taken before the fork) dies
    (Linux). A parent that died before the request took effect, even before the child ran at all,
    is seen too: the child then has another parent already (asking the child for its parent's pid
    would name that one)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def heed(env: MutableMapping[str, str]) -> None:
    """Die with the parent ``env`` names (``WORKFLOW_DIE_WITH``), if it names one; the variable is
    taken out, so what this process starts in turn (runs) is not tied to that parent."""
    parent = env.pop(ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
