"""Interrupts: a Ctrl-C that lands while modules are imported is kept, not lost.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT arrives. During
imports that is often inside a callback whose exceptions Python only prints ("Exception ignored
in: <function _get_module_lock.<locals>.cb …>") — the interrupt is gone, and `workflow up`, say,
goes on to start its servers and agentd and runs until killed. ``deferred`` holds SIGINT for a
block: one that arrives is noted, and raised as ``KeyboardInterrupt`` once the block is over.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block a SIGINT is noted; after it, it is raised (nothing changes when SIGINT is
    ignored or handled by someone else, or outside the main thread)."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if got:
        raise KeyboardInterrupt
