"""Runs: scripts for the scripted backend, unread counts, and the environment for the fake Anthropic API."""

from __future__ import annotations

import os
import subprocess
import sys
from subprocess import CompletedProcess

from helpers.fake_anthropic import FakeAnthropic
from helpers.git import GIT_ENV
from helpers.project import Project
from helpers.tiers import spawning
from workflow.agents.backends.scripted import dumps
from workflow.agents.contain import kill_session


def script(p: Project, role: str, steps: list[dict[str, object]]) -> None:
    (p.dir / "scripted").mkdir(exist_ok=True)
    (p.dir / "scripted" / f"{role}.toml").write_text(dumps(steps))


def slow_answer(seconds: float) -> list[dict[str, object]]:
    """A script that works ``seconds``, then answers the first message it was handed."""
    return [
        {"sleep": seconds},
        {
            "tool": "send_message",
            "event": "answer",
            "artifact": "specs/*/user-auth.md",
            "to": ["spec-writer"],
            "in_reply_to": "$first",
            "variables": {"CONTEXT": "done"},
        },
    ]


def unread(p: Project, box: str) -> int:
    return len([f for f in p.new_files(box) if not f.name.endswith("S")])


def anthropic_env(fake: FakeAnthropic) -> dict[str, str]:
    return {**GIT_ENV, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": fake.url}


@spawning
def run_command_role(
    p: Project,
    role: str = "spec-writer",
    env: dict[str, str] | None = None,
    backend: str = "command",
    timeout: float = 120,
) -> CompletedProcess[str]:
    """``run-role --with-email --backend BACKEND ROLE`` as the owner runs it (a real subprocess),
    with the owner's environment less its ``WORKFLOW_*``, a git identity and ``env``. Past
    ``timeout`` it is killed with everything it started (a git it left waiting on a FIFO too) and
    TimeoutExpired is raised."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    argv = [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", backend, role]
    with subprocess.Popen(
        argv,
        cwd=p.dir,
        env={**base, **GIT_ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
    return CompletedProcess(argv, proc.returncode, out, err)
