"""The real agent CLIs ``scripts/agent-clis`` installs from npm, for tests that drive them against a
stand-in model API (``helpers.model_api``); a test skips, saying why, where one is missing."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

# the user's real home (the tests give every process a scratch $HOME), as scripts/agent-clis sees it
HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
DIR = Path(os.environ.get("WORKFLOW_AGENT_CLIS") or HOME / ".cache" / "workflow-mail" / "agent-clis")


def cli_bin() -> Path:
    """The folder of the installed CLIs' commands (``claude``…)."""
    return DIR / "node_modules" / ".bin"


def needs(command: str, name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (cli_bin() / command).exists(),
        reason=f"{name} is not installed in {DIR} (scripts/agent-clis installs it; .ci/run runs that)",
    )


needs_claude = needs("claude", "Claude Code")
needs_codex = needs("codex", "Codex")
needs_gemini = needs("gemini", "Gemini CLI")
