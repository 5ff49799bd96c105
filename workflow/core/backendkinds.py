"""Backend kinds: every backend a run can use, declared once — its name, whether it runs a process
(an agent CLI on this machine), whether it has a CLI profile of its own, and its one-line description.

The config validator, the role front matter, ``--backend``, doctor, the scaffold's text and
``workflow backends`` read this tuple; ``agents.backends`` maps each name to how it is made (a
test checks both name the same backends). Adding a backend: one ``Kind`` here, one maker there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One backend: ``process`` — it runs a program (doctor checks the sandbox for it); ``profile``
    — an agent CLI driven by its profile in ``agents.backends.profiles`` (``[backends.NAME]`` is a CLI section)."""

    name: str
    about: str
    process: bool = False
    profile: bool = False
    program: str = ""  # a profile's command on PATH


KINDS = (
    Kind("anthropic", "the Messages API with tool use (ANTHROPIC_API_KEY)"),
    Kind("command", "any agent CLI with the prompt on stdin, acting by shell commands", process=True),
    Kind("scripted", "the actions listed in a TOML script (tests and the demo, no model)"),
    Kind(
        "claude-code",
        "Claude Code (claude -p) by its profile, the role's tools over MCP",
        process=True,
        profile=True,
        program="claude",
    ),
    Kind(
        "codex",
        "Codex CLI (codex exec) by its profile, the role's tools over MCP",
        process=True,
        profile=True,
        program="codex",
    ),
    Kind(
        "gemini", "Gemini CLI by its profile, the role's tools over MCP", process=True, profile=True, program="gemini"
    ),
)
BACKENDS = tuple(kind.name for kind in KINDS)
CLIS = tuple(kind.name for kind in KINDS if kind.profile)  # agent CLIs with a profile of their own
PROGRAMS = {kind.name: kind.program for kind in KINDS if kind.profile}  # profile → its command
PROCESS = tuple(kind.name for kind in KINDS if kind.process)  # backends that run a program


def kind(name: str) -> Kind | None:
    """The backend called ``name``, or None."""
    return next((k for k in KINDS if k.name == name), None)


def described(names: tuple[str, ...] = BACKENDS) -> str:
    """``"anthropic" (the Messages API …), "command" (…)`` — the choices, for help and refusals."""
    return ", ".join(f'"{k.name}" ({k.about})' for k in KINDS if k.name in names)
