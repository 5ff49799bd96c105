"""A Ctrl-C that lands in a callback whose exceptions Python only prints is lost — as one was in
`workflow up`'s imports (importlib's module-lock callback), and `up` then ran until killed.
``interrupts.deferred`` keeps it and raises it after the block."""

from __future__ import annotations

import os
import signal
import sys
import weakref
from collections.abc import Iterator

import pytest

from workflow.core.interrupts import deferred


@pytest.fixture(autouse=True)
def default_sigint() -> Iterator[None]:
    """As in a command started from a shell (a test worker may ignore SIGINT)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def ctrl_c_inside_a_callback() -> None:
    """SIGINT arriving while Python runs a weakref callback (as importlib's ``cb``): its
    KeyboardInterrupt is raised inside the callback, where Python prints it and goes on."""

    class Lock:
        pass

    lock = Lock()

    def cb(ref: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):  # the handler runs here, between bytecodes
            pass

    ref = weakref.ref(lock, cb)
    del lock
    assert ref() is None


def test_without_deferral_a_ctrl_c_in_a_callback_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable: list[type[BaseException] | None] = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda u: unraisable.append(u.exc_type)
    )  # what prints "Exception ignored in"
    ctrl_c_inside_a_callback()  # no KeyboardInterrupt reaches here: that is the defect
    assert unraisable == [KeyboardInterrupt]


def test_a_ctrl_c_during_the_block_is_raised_after_it() -> None:
    reached = False
    with pytest.raises(KeyboardInterrupt):
        with deferred():
            ctrl_c_inside_a_callback()
            reached = True  # the block goes on to its end: what it imports is imported whole
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C works as before after it
    with deferred():
        pass  # and a block with no Ctrl-C raises nothing


def test_an_ignored_sigint_stays_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # `nohup`, or a background job
    with deferred():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
