"""Backends: the agents a run can launch, behind one protocol with one verb — ``run``.

``anthropic`` talks to the Messages API with tool use; ``claude-code``, ``codex`` and ``gemini``
run that agent CLI by its profile (``profiles``: the role's tools by MCP, its output read);
``command`` runs any agent CLI with the prompt on stdin, acting by shell commands; ``scripted`` performs the actions listed in a TOML script
(tests and the demo, no network). Settings come from ``[backends.<name>]`` in workflow.toml,
read and checked with the rest of the config (``config.backends``).
"""

from __future__ import annotations

from pathlib import Path

from workflow.agents.backends.anthropic_api import AnthropicBackend
from workflow.agents.backends.base import Backend, RunInput, RunResult
from workflow.agents.backends.command import CliBackend, CommandBackend
from workflow.agents.backends.scripted import ScriptedBackend
from workflow.core.config import BACKENDS, CLIS, Config
from workflow.core.errors import ConfigError

NAMES = BACKENDS
__all__ = ["NAMES", "Backend", "RunInput", "RunResult", "chosen", "make_backend"]


def chosen(config: Config, role: str, own: str, override: str | None = None) -> str:
    """The backend a run of ``role`` uses: ``override`` (--backend), else the role file's
    ``backend``, else the project's ``[workflow] backend``; refused in one line when none is set."""
    name = override or own or config.backend
    if not name:
        raise ConfigError(
            f"no backend chosen for {role}: set [workflow] backend in {config.path or 'workflow.toml'} — "
            '"anthropic" (with ANTHROPIC_API_KEY), "command" (an agent CLI such as claude -p) or '
            '"scripted" (TOML scripts, no model) — or pass --backend'
        )
    return name


def make_backend(config: Config, name: str, script: Path | None = None) -> Backend:
    """The backend called ``name``, with its ``[backends.NAME]`` settings."""
    if name == "anthropic":
        return AnthropicBackend(config.backends.anthropic)
    if name == "command":
        return CommandBackend(config, config.backends.command)
    if name == "scripted":
        return ScriptedBackend(config, config.backends.scripted, script)
    if name in CLIS:
        return CliBackend(config, name)
    raise ConfigError(f"unknown backend {name!r}; expected one of {', '.join(NAMES)}")
