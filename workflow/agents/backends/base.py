"""Backend protocol: what every backend takes (``RunInput``), returns (``RunResult``) and does (``run``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple, Protocol

from workflow.agents.tools import RoleTools
from workflow.mail.rows import Row
from workflow.policy.roles import Role


def _no_mail() -> list[str]:
    return []


class RunInput(NamedTuple):
    role: Role
    prompt: str
    tools: RoleTools
    messages: tuple[Row, ...] = ()
    model: str = ""
    max_turns: int = 20
    poll: Callable[[], list[str]] = _no_mail  # new mail that arrived during the run, as text
    new_mail_file: Path | None = None  # where the command backend's agent is told to look
    interactive_input: Sequence[str] = ()
    run_dir: Path | None = None  # the run's transaction (owner's; agents.txn.Run.dir)
    deadline: float | None = None  # time.monotonic() by which the run must end (its timeout)
    token: str = ""  # the run's credential (a command agent's CLI calls log in with it)
    smtp: str = ""  # host:port of the server the agent submits to
    session: str = ""  # an agent session to resume (backends that can; the others start anew)


class RunResult(NamedTuple):
    ok: bool
    summary: str
    error: str = ""
    usage: Mapping[str, int] = MappingProxyType({})
    turns: int = 0
    session: str = ""  # the agent session this run was, when the backend can resume it later
    calls: tuple[str, ...] = ()  # the tool calls its agent CLI reported, in order ("" backends: none)
    transcript: str = ""  # the agent CLI's own transcript of the session (a file in the role's CLI state)
    session_gone: bool = False  # it failed because the session it was to resume is unknown to its CLI


class Backend(Protocol):
    """Run an agent on one prompt with the role's tools; never raises for the agent's failures.
    ``acts``: how its agent acts — "tools" (the backend calls the role's tools for it), "mcp" (an
    agent CLI, a sandboxed process given the tools by ``workflow mcp``) or "shell" (an agent CLI
    with only a shell: ``workflow-notify``, ``workflow move``, ``workflow finish``)."""

    acts: str

    def run(self, job: RunInput) -> RunResult: ...
