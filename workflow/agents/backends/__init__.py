"""Backends: the agents a run can launch, behind one protocol with one verb — ``run``.

``anthropic`` talks to the Messages API with tool use; ``command`` runs an agent CLI (claude -p,
codex exec…) with the prompt on stdin; ``scripted`` performs the actions listed in a TOML script
(tests and the demo, no network). Settings come from ``[backends.<name>]`` in workflow.toml.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from workflow.core.errors import ConfigError

if TYPE_CHECKING:
    from workflow.core.config import Config
    from workflow.mail.index import Row
    from workflow.policy.roles import Role
    from workflow.agents.tools import RoleTools

NAMES = ("anthropic", "command", "scripted")
KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "anthropic": {"model": str, "max_tokens": int, "max_turns": int, "timeout": (int, float), "max_retries": int},
    "command": {"argv": list, "timeout": (int, float), "model": str},
    "scripted": {"dir": str, "record_dir": str, "script": str},
}


class RunInput(NamedTuple):
    role: Role
    prompt: str
    tools: RoleTools
    messages: tuple[Row, ...] = ()
    model: str = ""
    max_turns: int = 20
    poll: Callable[[], list[str]] = lambda: []  # new mail that arrived during the run, as text
    new_mail_file: Path | None = None  # where the command backend's agent is told to look
    interactive_input: Sequence[str] = ()


class RunResult(NamedTuple):
    ok: bool
    summary: str
    error: str = ""
    usage: Mapping[str, int] = MappingProxyType({})
    turns: int = 0


class Backend(Protocol):
    """Run an agent on one prompt with the role's tools; never raises for the agent's failures."""

    def run(self, job: RunInput) -> RunResult: ...


def settings(config: Config, name: str) -> dict[str, Any]:
    """``[backends.<name>]``, checked: unknown keys and wrong types name the file and key."""
    file = str(config.path or "(defaults)")
    table = config.raw.get("backends", {})
    for key in table:
        if key not in NAMES:
            raise ConfigError(f"{file}: [backends.{key}]: unknown backend; expected one of {', '.join(NAMES)}")
    mine = table.get(name, {})
    if not isinstance(mine, dict):
        raise ConfigError(f"{file}: [backends.{name}]: expected a table")
    for key, value in mine.items():
        want = KEYS[name].get(key)
        if want is None:
            raise ConfigError(f"{file}: [backends.{name}] {key}: unknown key; expected one of {', '.join(KEYS[name])}")
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(f"{file}: [backends.{name}] {key}: expected {getattr(want, '__name__', 'a number')}, got {value!r}")
    return dict(mine)


def make_backend(config: Config, name: str, script: Path | None = None) -> Backend:
    if name not in NAMES:
        raise ConfigError(f"unknown backend {name!r}; expected one of {', '.join(NAMES)}")
    opts = settings(config, name)
    if name == "anthropic":
        from workflow.agents.backends.anthropic_api import AnthropicBackend

        return AnthropicBackend(opts)
    if name == "command":
        from workflow.agents.backends.command import CommandBackend

        return CommandBackend(config, opts)
    from workflow.agents.backends.scripted import ScriptedBackend

    return ScriptedBackend(config, opts, script)
