"""agentd's stop signal: its handler never waits on a lock the interrupted main thread holds."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, cast

from workflow.agentd.daemon import Agentd
from workflow.cli.agentd import stop_handler


class Daemon:
    """What the handler touches of an Agentd: its events and request_stop (as Agentd's)."""

    def __init__(self) -> None:
        self.stop, self.hard, self.wake = threading.Event(), threading.Event(), threading.Event()

    def request_stop(self) -> None:
        if self.stop.is_set():
            self.hard.set()
        self.stop.set()
        self.wake.set()


def test_a_signal_landing_inside_event_wait_does_not_deadlock() -> None:
    """The hang seen in CI: SIGTERM arrived while the main loop was inside ``wake.wait``, holding
    the event's lock, and the handler's ``wake.set()`` waited for that same lock forever."""
    daemon = Daemon()
    handler = stop_handler(cast(Agentd, daemon))
    returned = threading.Event()

    def main_loop() -> None:
        cond: Any = daemon.wake._cond  # held by Event.wait while the signal lands
        with cond:
            handler(signal.SIGTERM, None)
            returned.set()

    t = threading.Thread(target=main_loop, daemon=True)
    t.start()
    assert returned.wait(5), "the handler blocked on the lock its own thread holds"
    end = time.monotonic() + 5
    while not daemon.wake.is_set() and time.monotonic() < end:
        time.sleep(0.01)
    assert daemon.stop.is_set() and daemon.wake.is_set() and not daemon.hard.is_set()
    handler(signal.SIGTERM, None)  # a second signal: stop now
    end = time.monotonic() + 5
    while not daemon.hard.is_set() and time.monotonic() < end:
        time.sleep(0.01)
    assert daemon.hard.is_set()
