"""Login: whether a credential reaches an agent CLI's agents, and the one line that says how to give one.

Said once, here: doctor's ``agent-cli`` check (``agents.clicheck``), ``workflow up`` and ``agentd
run`` before they start, ``run-role`` before a run, and a run whose CLI answered "Not logged in"
(its own advice — ``/login``, an interactive command no run can type — and its JSON are replaced
by this line). A CLI's agents get a credential when one of the variables it reads is set in the
environment of agentd and run-role and passed to agents by ``[runs] env``: each role's CLI state
directory is its own, so a login stored in the owner's ``~/.claude`` or ``~/.codex`` does not reach
a run. Which variables, and how to get one: the CLI's record (``core.backendkinds.Cli``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from workflow.core.backendkinds import cli
from workflow.core.config import Config

# what the CLIs print when they find no credential (Claude Code: "Not logged in · Please run /login")
MAX_SAID = 300  # characters of the CLI's own line kept after ours
LOGGED_OUT = re.compile(r"Not logged in|Please run /login|Invalid API key|not authenticated", re.I)
# words that may be about a missing credential or something else (Gemini CLI's "auth method" when it
# could not read its settings): our line, then theirs
MAYBE_LOGGED_OUT = re.compile(r"auth method", re.I)


def no_credential(name: str) -> str:
    """The line for CLI ``name`` whose agents get no credential (doctor prints it after ``agent-cli: ``)."""
    record = cli(name)
    if record is None:
        raise KeyError(name)
    return (
        f"{name}: no credential reaches its agents: set {' or '.join(record.credentials)} ({record.login_hint}) where "
        "agentd and run-role run, and keep it in [runs] env (each role's CLI state is its own, so a "
        "login stored in your home is not used)"
    )


def missing(name: str, config: Config, env: Mapping[str, str]) -> str:
    """``no_credential(name)`` when no credential of CLI ``name`` reaches its agents; "" when one does
    (or ``name`` is no agent CLI)."""
    record = cli(name)
    if record is None or any(env.get(v) and v in config.runs.env for v in record.credentials):
        return ""
    return no_credential(name)


def logged_out(name: str, said: str) -> str:
    """Our line when CLI ``name``'s own words ``said`` (its error, or its output) say it is not logged
    in; when they only may, our line then the line of theirs; else ""."""
    if cli(name) is None:
        return ""
    if LOGGED_OUT.search(said):
        return no_credential(name)
    found = MAYBE_LOGGED_OUT.search(said)
    if found is None:
        return ""
    start, end = said.rfind("\n", 0, found.start()) + 1, said.find("\n", found.end())
    line = said[start : end if end >= 0 else len(said)].strip()
    return f"{no_credential(name)}; it said: {line[:MAX_SAID]}"
