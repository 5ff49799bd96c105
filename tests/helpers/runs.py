"""Runs: scripts for the scripted backend, unread counts, and the environment for the fake Anthropic API."""

from __future__ import annotations

from helpers.fake_anthropic import FakeAnthropic
from helpers.git import GIT_ENV
from helpers.project import Project
from workflow.agents.backends.scripted import dumps


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
