"""CLI check: whether each agent CLI a project uses starts, and whether a credential reaches its agents.

``workflow doctor`` asks. A CLI is in use when ``[workflow]`` or ``[agentd] backend``, a role's
file or a panel member names its profile. It starts when ``PROGRAM --version`` answers (within
``VERSION_TIMEOUT``); its agents are logged in when one of the variables the CLI reads for a
credential is set in this environment and passed to agents by ``[runs] env`` — each role's CLI
state directory is its own, so a login stored in the owner's ``~/.claude`` or ``~/.codex`` does
not reach a run.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from workflow.agents.backends.profiles import PROFILES
from workflow.core.config import CLIS, Config
from workflow.policy.roster import Roster

VERSION_TIMEOUT = 20.0
CREDENTIALS = {
    "claude-code": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "gemini": ("GEMINI_API_KEY",),  # headless Gemini CLI takes no other key: GOOGLE_API_KEY alone is refused
}
LOGIN_HINT = {
    "claude-code": "an API key, or `claude setup-token` for a subscription's CLAUDE_CODE_OAUTH_TOKEN",
    "codex": "an OpenAI API key",
    "gemini": "a Gemini API key from AI Studio",
}


def in_use(config: Config, roster: Roster) -> list[str]:
    """The agent CLIs some run of this project would start."""
    named = {config.backend, config.agentd.backend}
    named |= {roster.roles[name].backend for name in roster.roles}
    named |= {m.backend for p in config.panels for m in p.members}
    return [name for name in CLIS if name in named]


def problems(config: Config, roster: Roster, env: Mapping[str, str]) -> list[str]:
    """One line per CLI in use that does not start, or whose agents get no credential."""
    out = []
    for name in in_use(config, roster):
        opts = config.backends.cli(name)
        program = opts.program or PROFILES[name].program
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
        names = CREDENTIALS[name]
        if not any(env.get(v) and v in config.runs.env for v in names):
            out.append(
                f"{name}: no credential reaches its agents: set {' or '.join(names)} ({LOGIN_HINT[name]}) where "
                "agentd and run-role run, and keep it in [runs] env (each role's CLI state is its own, so a "
                "login stored in your home is not used)"
            )
    return out
