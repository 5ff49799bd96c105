"""Profiles: how a run drives each agent CLI — Claude Code, Codex, Gemini CLI — so it does the work or fails loudly.

A profile knows its CLI's contract: how the prompt goes in (stdin), which output format to ask
for and how to read a session id, a summary, token use, cost and a failure from it; how to give
the CLI the role's tools (``workflow mcp`` over stdio, started with the run's own interpreter so
PATH does not matter) and nothing else of the project's (``--strict-mcp-config``, no setting
sources; Codex without its user config; Gemini with settings of the role's own that name only our
server); the model, turn and cost limits, and resuming a session. The CLI runs in the run's sandbox
(``agents.sandbox``), which is the boundary; the CLI's own approval prompts are answered by the
profile (each CLI's headless mode would otherwise deny its tools and exit 0).

A profile is the behaviour half of one agent CLI: its data half — name, command, state folder and
the variable naming it, credentials, login hint, the folders of the tree it obeys — is its ``Kind``
in ``core.backendkinds`` (low enough for the agent-files guard to read), which the profile holds
as ``kind``. ``launch(plan)`` gives the argv and environment; ``report(out)`` reads what the CLI
printed, ``said(out, err)`` why it failed when it exited non-zero ("": its output is shown as
printed), and ``turns`` counts its model turns. ``PROFILES`` is derived from the profiles.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple, Protocol

from workflow.agents.backends.reports import (
    Report,
    claude_report,
    codex_report,
    codex_turns,
    gemini_error,
    gemini_report,
    gemini_turns,
)
from workflow.core.backendkinds import CLAUDE_CODE, CODEX, GEMINI, Cli, Kind
from workflow.core.config import CliConfig
from workflow.core.files import write_atomic

SERVER = "workflow"  # the MCP server's name in every CLI's configuration


class Plan(NamedTuple):
    """What one run asks of its CLI."""

    tools_socket: str  # the run's tool server (agents.toolserver)
    state: Path  # the role's own CLI state directory (StateDir.cli)
    model: str = ""
    max_turns: int = 20
    session: str = ""  # resume this session
    read_only: bool = False  # a panel member: read-only tools
    sandboxed: bool = True  # the run's sandbox is enforced (the CLI's own may step aside)
    env: Mapping[str, str] = MappingProxyType({})  # the owner's variables the agent gets (``agent_env``)


class Launch(NamedTuple):
    argv: list[str]
    env: dict[str, str]


def real_dir(path: Path) -> None:
    """``path`` as a real directory of ours: whatever else an agent left there (a symlink, a FIFO,
    a file) is removed first."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(parents=True, mode=0o700)
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # a symlink is removed, never followed
        path.mkdir(mode=0o700)


def mcp_command(socket: str) -> list[str]:
    """The command that serves the run's tools: this interpreter, so no PATH is needed, isolated
    (``-I``), so a ``workflow/`` package an earlier run left in the project (the CLI's working
    directory) is never what runs as this role's tool server, nor PYTHON* variables."""
    return [sys.executable, "-I", "-m", "workflow", "mcp", "--tools", socket]


class Profile(Protocol):
    """How a run drives one agent CLI."""

    kind: Kind

    def launch(self, opts: CliConfig, plan: Plan) -> Launch: ...
    def report(self, out: str) -> Report: ...
    def said(self, out: str, err: str) -> str: ...
    def turns(self, report: Report, transcript: str) -> int: ...


def data(profile: Profile) -> Cli:
    """The data half of ``profile``'s CLI."""
    if profile.kind.cli is None:
        raise TypeError(f"{profile.kind.name} is no agent CLI")
    return profile.kind.cli


def state_env(profile: Profile, state: Path) -> dict[str, str]:
    """The variable that names the CLI's state folder, in the role's CLI state directory ``state``."""
    record = data(profile)
    return {record.state_env: str(state / record.state)}


QUIET_CLAUDE = {"DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


class ClaudeCode:
    """``claude -p`` with stream-json output (every tool call it makes, then its result object),
    only our MCP server, no settings from the tree or the home."""

    kind = CLAUDE_CODE
    reading = ("Read", "Glob", "Grep")  # its own tools a panel member gets …
    working = (*reading, "Edit", "Write", "Bash")  # … and a role

    def launch(self, opts: CliConfig, plan: Plan) -> Launch:
        command = mcp_command(plan.tools_socket)
        servers = {"mcpServers": {SERVER: {"type": "stdio", "command": command[0], "args": command[1:]}}}
        tools = opts.tools or (self.reading if plan.read_only else self.working)
        argv = [opts.program or self.kind.program, "-p", "--output-format", "stream-json", "--verbose"]
        argv += ["--mcp-config", json.dumps(servers), "--strict-mcp-config", "--setting-sources", ""]
        argv += ["--tools", ",".join(tools), "--allowedTools", ",".join([f"mcp__{SERVER}", *tools])]
        if opts.model or plan.model:
            argv += ["--model", plan.model or opts.model]
        argv += ["--max-turns", str(opts.max_turns or plan.max_turns)]
        if opts.max_budget_usd:
            argv += ["--max-budget-usd", f"{opts.max_budget_usd:g}"]
        if plan.session:
            argv += ["--resume", plan.session]
        # no side requests (a session title, flavour text), no telemetry or update checks: a run
        # makes the model calls its work needs, and waits on nothing else
        env = {**state_env(self, plan.state), **QUIET_CLAUDE}
        return Launch([*argv, *opts.args], env)

    def report(self, out: str) -> Report:
        return claude_report(out)

    def said(self, out: str, err: str) -> str:
        return ""

    def turns(self, report: Report, transcript: str) -> int:
        """Its model turns: the result's ``num_turns``."""
        return report.turns


class Codex:
    """``codex exec --json``, the role's MCP server, no user config; our sandbox instead of its own.

    Codex reads no OPENAI_BASE_URL and, without a login in its CODEX_HOME (the role's own), no
    OPENAI_API_KEY: the base URL goes in as ``-c openai_base_url=…``, the key as CODEX_API_KEY
    (the owner's, else OPENAI_API_KEY)."""

    kind = CODEX

    def launch(self, opts: CliConfig, plan: Plan) -> Launch:
        command = mcp_command(plan.tools_socket)
        argv = [opts.program or self.kind.program, "exec"]
        if plan.session:
            argv += ["resume", plan.session]
        argv += ["--json", "--skip-git-repo-check", "--ignore-user-config", "--ignore-rules"]
        # inside bubblewrap Codex's own sandbox cannot nest; the run's sandbox is the boundary
        if plan.sandboxed:
            argv += ["--dangerously-bypass-approvals-and-sandbox"]
        else:  # `exec resume` takes no --sandbox: the setting it stands for
            argv += ["-c", f"sandbox_mode={json.dumps('read-only' if plan.read_only else 'workspace-write')}"]
        argv += ["-c", 'approval_policy="never"']
        argv += ["-c", f"mcp_servers.{SERVER}.command={json.dumps(command[0])}"]
        argv += ["-c", f"mcp_servers.{SERVER}.args={json.dumps(command[1:])}"]
        argv += ["-c", f"mcp_servers.{SERVER}.startup_timeout_sec=30"]
        # a server that does not start fails the run (else Codex goes on without the role's tools),
        # and its tools need no approval (under approval_policy="never" Codex would deny every call)
        argv += ["-c", f"mcp_servers.{SERVER}.required=true"]
        argv += ["-c", f'mcp_servers.{SERVER}.default_tools_approval_mode="approve"']
        if plan.env.get("OPENAI_BASE_URL"):
            argv += ["-c", f"openai_base_url={json.dumps(plan.env['OPENAI_BASE_URL'])}"]
        if opts.model or plan.model:
            argv += ["-m", plan.model or opts.model]
        env = state_env(self, plan.state)
        key = plan.env.get("CODEX_API_KEY") or plan.env.get("OPENAI_API_KEY")
        if key:
            env["CODEX_API_KEY"] = key
        return Launch([*argv, *opts.args, "-"], env)

    def report(self, out: str) -> Report:
        return codex_report(out)

    def said(self, out: str, err: str) -> str:
        return ""

    def turns(self, report: Report, transcript: str) -> int:
        """Its model requests, from its session's rollout (its output counts only thread turns)."""
        try:
            with open(transcript, "rb") as f:
                n = codex_turns(f.read(16 << 20).decode("utf-8", "replace"))
        except OSError:
            n = 0
        return n or report.turns


class Gemini:
    """``gemini -p ""`` (the prompt on stdin) with JSON output; settings of the role's own naming only
    our (trusted) MCP server, none of the project's.

    Gemini CLI skips a system settings file (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``) unless root owns
    it and every folder above it, none writable by group or others; so the settings are the user
    settings of the CLI's home, ``$GEMINI_CLI_HOME/.gemini/settings.json``, the role's own. The
    project's ``.gemini/settings.json`` would be read over them in a trusted folder: folder trust
    is on, so the project is untrusted when the settings are read, and ``--skip-trust`` trusts it
    for the session only after that (untrusted, the CLI would start no stdio MCP server and refuse
    yolo). It authenticates with ``GEMINI_API_KEY`` (``security.auth.selectedType``: with
    ``GOOGLE_GEMINI_BASE_URL`` set it would pick its "gateway" login, which its headless mode
    refuses: "Invalid auth method selected."), at ``GOOGLE_GEMINI_BASE_URL`` when set. The turn
    limit is ``model.maxSessionTurns`` (exit 53 past it)."""

    kind = GEMINI

    def launch(self, opts: CliConfig, plan: Plan) -> Launch:
        command = mcp_command(plan.tools_socket)
        home = plan.state / data(self).state
        settings = {
            "mcpServers": {SERVER: {"command": command[0], "args": command[1:], "trust": True, "timeout": 600000}},
            "mcp": {"allowed": [SERVER]},
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "model": {"maxSessionTurns": opts.max_turns or plan.max_turns},
        }
        # the role's CLI state is its agent's to write: what we write there goes through no symlink
        # or FIFO it left (a real directory, a new file renamed into place)
        real_dir(home)
        real_dir(home / ".gemini")
        settings_file = home / ".gemini" / "settings.json"
        if settings_file.is_dir() and not settings_file.is_symlink():  # a folder an agent left in its place
            shutil.rmtree(settings_file)
        write_atomic(home / ".gemini" / "settings.json", json.dumps(settings, indent=2), mode=0o600, durable=False)
        argv = [opts.program or self.kind.program, "--output-format", "stream-json", "--skip-trust"]
        argv += ["--allowed-mcp-server-names", SERVER]
        argv += ["--approval-mode", "yolo" if plan.sandboxed and not plan.read_only else "default"]
        if opts.model or plan.model:
            argv += ["-m", plan.model or opts.model]
        if plan.session:
            argv += ["--resume", plan.session]
        # run in this process, not relaunched in a second node for a larger heap (a second's start-up)
        env = {**state_env(self, plan.state), "GEMINI_CLI_NO_RELAUNCH": "true"}
        return Launch([*argv, *opts.args, "-p", ""], env)

    def report(self, out: str) -> Report:
        return gemini_report(out)

    def said(self, out: str, err: str) -> str:
        """Its error object, printed on stderr when it exits non-zero (an API error, the turn limit)."""
        return gemini_error(err) or gemini_error(out)

    def turns(self, report: Report, transcript: str) -> int:
        """Its model turns: its main agent's requests (its JSON object's ``stats``), else its chat's
        model messages (stream-json, which lists the calls in order, counts no requests)."""
        if report.turns or not transcript:
            return report.turns
        try:
            with open(transcript, "rb") as f:
                return gemini_turns(f.read(16 << 20).decode("utf-8", "replace"))
        except OSError:
            return 0


ALL: tuple[Profile, ...] = (ClaudeCode(), Codex(), Gemini())
PROFILES: Mapping[str, Profile] = MappingProxyType({p.kind.name: p for p in ALL})  # derived: name → profile
