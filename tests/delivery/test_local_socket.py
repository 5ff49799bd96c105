"""The local socket (``delivery.local``): its mode is the owner's, and listening on it never touches
the process's umask — a panel's members start their runs at once, each with its own socket, and a
thread making a folder meanwhile once got it 0600 under a borrowed umask 0177, a folder no sandboxed
agent can enter (Codex: "Permission denied (os error 13)", Gemini: no settings, so "auth method")."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow.core.modes import owner_only
from workflow.delivery.local import listen


@pytest.fixture(autouse=True)
def owners_umask() -> Iterator[None]:
    """The umask the owner's processes run with, this test's only."""
    old = os.umask(0o077)
    owner_only()
    yield
    os.umask(old)


def test_the_socket_is_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "sock" / "s"
    sock = listen(str(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        sock.close()


def test_folders_made_while_sockets_are_bound_keep_their_search_bit(tmp_path: Path) -> None:
    stop = threading.Event()

    def bind_forever() -> None:
        n = 0
        while not stop.is_set():
            listen(str(tmp_path / "socks" / f"s{n % 8}")).close()
            n += 1

    binder = threading.Thread(target=bind_forever)
    binder.start()
    try:
        made = tmp_path / "made"
        made.mkdir()
        for i in range(4000):
            os.mkdir(made / str(i))
    finally:
        stop.set()
        binder.join()
    modes = {stat.S_IMODE((made / str(i)).stat().st_mode) for i in range(4000)}
    assert modes == {0o700}, sorted(oct(m) for m in modes)
