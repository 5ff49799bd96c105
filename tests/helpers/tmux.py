"""Tmux: a terminal program (mutt, neomutt) driven like a person at the keyboard, its screen read back."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from helpers.tiers import spawning


@spawning
class Tmux:
    """``command`` in a tmux server of its own (``user``: the argv prefix that runs it as another user)."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path, user: Sequence[str] = (), rows: int = 40) -> None:
        self.name = f"wf{os.getpid()}{time.monotonic_ns() % 100000}"
        self.sock = [*user, "tmux", "-L", self.name]
        self.env = {**env, "TERM": "xterm-256color"}
        subprocess.run(
            [*self.sock, "new-session", "-d", "-x", "160", "-y", str(rows), "-c", str(cwd), command],
            env=self.env,
            cwd=cwd,
            check=True,
        )

    def screen(self) -> str:
        return subprocess.run([*self.sock, "capture-pane", "-p"], capture_output=True, text=True, env=self.env).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.sock, "send-keys", *keys], check=True, env=self.env)

    def wait(self, text: str, timeout: float = 15, times: int = 1) -> str:
        """The screen once ``text`` is on it ``times`` times (polled: a terminal says nothing when it
        has drawn)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if s.count(text) >= times:
                return s
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared {times} time(s); the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run([*self.sock, "kill-server"], capture_output=True, env=self.env)
