"""CLI check: whether each agent CLI a project uses starts, and whether a credential reaches its agents.

``workflow doctor`` asks; ``workflow up`` and ``agentd run`` refuse to start on its lines
(``refuse``). A CLI is in use when ``[workflow]`` or ``[agentd] backend``, a role's file or a panel
member names its profile. It starts when ``PROGRAM --version`` answers (within
``VERSION_TIMEOUT``); its agents are logged in when one of the variables the CLI reads for a
credential is set in this environment and passed to agents by ``[runs] env`` (``backends.login``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from workflow.agents.backends.login import missing
from workflow.agents.backends.profiles import PROFILES
from workflow.core.config import CLIS, Config
from workflow.core.errors import ConfigError
from workflow.policy.roster import Roster

VERSION_TIMEOUT = 20.0


def in_use(config: Config, roster: Roster, override: str | None = None) -> list[str]:
    """The agent CLIs some run of this project would start (with ``override``, agentd's
    ``--backend``: that one for every role, panel members still their own)."""
    named = {m.backend for p in config.panels for m in p.members}
    if override:
        named.add(override)
    else:
        named |= {config.backend, config.agentd.backend}
        named |= {roster.roles[name].backend for name in roster.roles}
    return [name for name in CLIS if name in named]


def problems(config: Config, roster: Roster, env: Mapping[str, str], override: str | None = None) -> list[str]:
    """One line per CLI in use that does not start, or whose agents get no credential."""
    out = []
    for name in in_use(config, roster, override):
        opts = config.backends.cli(name)
        program = opts.program or PROFILES[name].kind.program
        found = shutil.which(program, path=env.get("PATH"))
        if found is None:
            out.append(f"{name}: {program} is not on PATH (install it, or set [backends.{name}] program)")
            continue
        try:
            r = subprocess.run(
                [found, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            out.append(f"{name}: {found} --version did not answer ({e})")
            continue
        if r.returncode != 0:
            out.append(f"{name}: {found} --version failed: {(r.stderr or r.stdout).strip()[-200:]}")
            continue
        line = missing(name, config, env)
        if line:
            out.append(line)
    return out


def refuse(config: Config, roster: Roster, env: Mapping[str, str], override: str | None = None) -> None:
    """Before the first run (``workflow up``, ``agentd run``): raise ConfigError with doctor's
    ``agent-cli`` lines when a CLI in use does not start or its agents would get no credential —
    every run would fail on it, and agentd would spend its retries."""
    lines = problems(config, roster, env, override)
    if lines:
        raise ConfigError(
            "\n".join(f"agent-cli: {line}" for line in lines)
            + "\nnothing was started (no run could succeed); `workflow doctor` checks it again"
        )
