"""Backends: the agents a run can launch, behind one protocol with one verb — ``run``.

``anthropic`` talks to the Messages API with tool use; ``claude-code``, ``codex`` and ``gemini``
run that agent CLI by its profile (``profiles``: the role's tools by MCP, its output read);
``command`` runs any agent CLI with the prompt on stdin, acting by shell commands; ``scripted`` performs the actions listed in a TOML script
(tests and the demo, no network). Settings come from ``[backends.<name>]`` in workflow.toml,
read and checked with the rest of the config (``config.backends``). Each backend is declared once in
``core.backendkinds.KINDS`` (name, description, runs a process, has a CLI profile); ``MAKERS`` says how
each is made, and ``make_backend`` only looks the name up there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from workflow.agents.backends.anthropic_api import AnthropicBackend
from workflow.agents.backends.base import Backend, RunInput, RunResult
from workflow.agents.backends.command import CliBackend, CommandBackend
from workflow.agents.backends.scripted import ScriptedBackend
from workflow.core.backendkinds import BACKENDS, KINDS, described
from workflow.core.config import Config
from workflow.core.errors import ConfigError

NAMES = BACKENDS
__all__ = ["MAKERS", "NAMES", "Backend", "RunInput", "RunResult", "chosen", "make_backend"]

Maker = Callable[[Config, str, "Path | None"], Backend]


def _cli(config: Config, name: str, script: Path | None) -> Backend:
    return CliBackend(config, name)


# How each backend is made (config, its name, the scripted backend's script); every Kind has one.
MAKERS: Mapping[str, Maker] = MappingProxyType(
    {
        "anthropic": lambda config, name, script: AnthropicBackend(config.backends.anthropic),
        "command": lambda config, name, script: CommandBackend(config, config.backends.command),
        "scripted": lambda config, name, script: ScriptedBackend(config, config.backends.scripted, script),
        **{kind.name: _cli for kind in KINDS if kind.profile},
    }
)


def chosen(config: Config, role: str, own: str, override: str | None = None) -> str:
    """The backend a run of ``role`` uses: ``override`` (--backend), else the role file's
    ``backend``, else the project's ``[workflow] backend``; refused in one line when none is set."""
    name = override or own or config.backend
    if not name:
        raise ConfigError(
            f"no backend chosen for {role}: set [workflow] backend in {config.path or 'workflow.toml'} to one of "
            f"{described()} — or pass --backend"
        )
    return name


def make_backend(config: Config, name: str, script: Path | None = None) -> Backend:
    """The backend called ``name``, with its ``[backends.NAME]`` settings."""
    maker = MAKERS.get(name)
    if maker is None:
        raise ConfigError(
            f"unknown backend {name!r}; expected one of {', '.join(NAMES)} (workflow backends lists them)"
        )
    return maker(config, name, script)
