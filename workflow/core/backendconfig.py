"""Backend config: the ``[backends.NAME]`` sections, each declared once as its typed record.

Every field is ``Annotated[type, Spec] = default`` (``core.schema``): the key, what a value must be
and its default in one line. ``BACKEND_SECTIONS`` is the registry ``[backends]`` is read against.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, NamedTuple

from workflow.core.backendkinds import CLIS
from workflow.core.schema import Int, Num, Owned, Regex, Section, Str, Strs, Tables

DAY = 86400.0
CONTAIN = Str(choices=("auto", "bwrap", "cgroup", "none"))


class AnthropicConfig(NamedTuple):
    model: Annotated[str, Str()] = "claude-sonnet-4-5"
    max_tokens: Annotated[int, Int(1, 1_000_000)] = 4096
    max_turns: Annotated[int, Int(1, 1000)] = 20
    timeout: Annotated[float, Num(0.1, DAY)] = 120.0
    max_retries: Annotated[int, Int(0, 100)] = 2


class CommandConfig(NamedTuple):
    # json: its denials and errors are read
    argv: Annotated[tuple[str, ...], Owned("argv")] = ("claude", "-p", "--output-format", "json")
    timeout: Annotated[float, Num(0.1, 7 * DAY)] = 1800.0
    model: Annotated[str, Str()] = ""
    contain: Annotated[str, CONTAIN] = "auto"  # auto | bwrap | cgroup | none (agents.contain)
    resume: Annotated[
        tuple[str, ...], Strs(empty=True)
    ] = ()  # arguments that resume a session, e.g. ["--resume", "{session}"]
    # what the CLI says (a regular expression, case-insensitive) when the session is unknown: a new one takes the run
    resume_gone: Annotated[str, Regex()] = r"no such session|session not found|unknown session"


class CliConfig(NamedTuple):
    """``[backends.claude-code]``, ``[backends.codex]``, ``[backends.gemini]``: an agent CLI run
    with its own profile (its arguments, MCP wiring and output are the profile's; these tune it)."""

    program: Annotated[str, Owned("program")] = ""  # "": the CLI's own command (claude, codex, gemini) on PATH
    model: Annotated[str, Str()] = ""  # "": the CLI's default; a role's or panel member's model wins
    max_turns: Annotated[int, Int(0, 1000)] = 0  # 0: the role's max_turns, else 20 (CLIs that take a limit)
    max_budget_usd: Annotated[float, Num(0, 1_000_000)] = 0.0  # 0: no limit (claude-code)
    # the CLI's own tools it may use beside the role's (): the profile's
    tools: Annotated[tuple[str, ...], Strs(empty=True)] = ()
    args: Annotated[tuple[str, ...], Owned("args")] = ()  # more arguments, appended
    timeout: Annotated[float, Num(0.1, 7 * DAY)] = 1800.0
    contain: Annotated[str, CONTAIN] = "auto"


class ScriptedConfig(NamedTuple):
    dir: Annotated[str, Owned("folder")] = "scripted"
    record_dir: Annotated[str, Str()] = ""  # save every prompt here (tests prove what a run saw)
    script: Annotated[str, Owned("file")] = ""


BACKEND_SECTIONS: MappingProxyType[str, Section[Any]] = MappingProxyType(
    {
        "anthropic": Section(AnthropicConfig),
        "command": Section(CommandConfig),
        "scripted": Section(ScriptedConfig),
        **dict.fromkeys(CLIS, Section(CliConfig)),
    }
)


class BackendsConfig(NamedTuple):
    anthropic: AnthropicConfig = AnthropicConfig()
    command: CommandConfig = CommandConfig()
    scripted: ScriptedConfig = ScriptedConfig()
    clis: Mapping[str, CliConfig] = MappingProxyType({})  # [backends.NAME] of each agent CLI set (one of CLIS)

    def cli(self, name: str) -> CliConfig:
        """The settings of the agent CLI ``name`` (one of CLIS): its section, else the defaults."""
        return self.clis.get(name, CliConfig())


def _backends(records: dict[str, Any]) -> BackendsConfig:
    clis = MappingProxyType({name: records.pop(name) for name in CLIS if name in records})
    return BackendsConfig(**records, clis=clis)


# [backends]: each [backends.NAME] against its record (an agent CLI's lands in clis by its name)
BACKENDS_TABLE: Tables[BackendsConfig] = Tables("backend", BACKEND_SECTIONS, _backends)
