"""Command backend: run an agent CLI with the prompt on stdin, in its sandbox, with the run's tools at hand.

``[backends.command] argv = [...]`` (any CLI that reads a prompt on stdin; it acts by shell
commands), or an agent CLI by its profile (``CliBackend``: ``claude-code``, ``codex``,
``gemini``; ``profiles``). A run of either succeeds only when the agent exits 0, its output
reports no failure, and it finished (``workflow finish done`` or the MCP tool; the run's tool
server, ``agents.toolserver``, listens on WORKFLOW_TOOLS for both). The agent
runs in its sandbox (``agents.sandbox``: its project and its run, no mail, no credential file)
and gets, to call ``workflow-notify`` and ``workflow move`` as its role: WORKFLOW_ROLE,
WORKFLOW_PROJECT, WORKFLOW_CONFIG; WORKFLOW_TOKEN, the run's credential, and WORKFLOW_SMTP, the
server to submit to (what it sends is held until the run succeeds; its moves are reverted if the
run fails); WORKFLOW_RUN, its directory of the run, with ``handed`` (WORKFLOW_HANDED: the
Message-IDs handed to it), ``new-mail.md`` (WORKFLOW_NEW_MAIL: mail that arrives during the run)
and ``threads.json`` (what its replies thread onto). A panel member gets no credential: the panel
sends for it. The agent is contained (``contain``): when it exits, times out, or its run-role is
interrupted or killed, nothing it started survives.

Sessions: an agent whose output is a JSON object with ``session_id`` (``claude -p --output-format
json``: its ``result`` is the summary) or that prints a line ``WORKFLOW_SESSION=<id>`` reports the
session it was; a run asked to resume one gets ``resume`` appended to argv (``["--resume",
"{session}"]``) and WORKFLOW_SESSION in its environment. Without ``resume`` every run starts anew.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from workflow.agents.backends.base import RunInput, RunResult
from workflow.agents.backends.login import logged_out
from workflow.agents.backends.profiles import PROFILES, Launch, Plan, data, real_dir
from workflow.agents.backends.reports import SESSION_ID, Report, plain
from workflow.agents.contain import Contained, choose
from workflow.agents.sandbox import status, view
from workflow.agents.toolserver import ToolServer
from workflow.core.backendkinds import CLI_KINDS
from workflow.core.config import CommandConfig, Config
from workflow.core.errors import ConfigError

TAIL = 4000
MAX_PRINTED = 16 << 20  # the most of an agent's output run-role reads: its first MiB and its last 15 MiB


def printed(f: IO[bytes]) -> str:
    """What an agent printed to ``f`` (a file), at most MAX_PRINTED bytes of it: the head (a
    session's first event) and the tail (its result)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size <= MAX_PRINTED:
        return f.read().decode("utf-8", "replace")
    head = f.read(1 << 20)
    f.seek(size - (MAX_PRINTED - (1 << 20)))
    return (head + b"\n[...]\n" + f.read()).decode("utf-8", "replace")


TOOLS_SOCKET = "tools.sock"  # in the run's agent directory: the run's tool server (agents.toolserver)
INHERITED_NOT = (
    "WORKFLOW_TOKEN",
    "WORKFLOW_RUN",
    "WORKFLOW_SMTP",
    "WORKFLOW_HANDED",
    "WORKFLOW_NEW_MAIL",
    "WORKFLOW_SESSION",
    "WORKFLOW_TOOLS",
)
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR")


def agent_env(owner: Mapping[str, str], listed: Sequence[str]) -> dict[str, str]:
    """The environment an agent starts from: an allowlist of the owner's — PATH, home, user,
    locale (``LC_*``), time zone, terminal — plus the names ``[runs] env`` lists (default: the
    model providers' keys the agent CLIs need). Nothing else: the bridges' tokens, the Gmail
    password, cloud keys, the owner's git identity (a run commits as its role) and the owner's
    ``WORKFLOW_*`` never reach an agent."""
    keep = set(BASE_ENV) | set(listed)
    return {k: v for k, v in owner.items() if (k in keep or k.startswith("LC_")) and k not in INHERITED_NOT}


def cli_state(config: Config, role: str) -> Path:
    """The role's own agent-CLI state directory, made the owner's only (``StateDir.cli``): what
    its CLI writes there (settings, sessions, transcripts) outlives the run, so a session can be
    resumed, and no other role — no other panel member — sees it."""
    path = config.state.cli(role)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for kind in CLI_KINDS:  # each CLI's state folder (``Cli.state``): a real directory, whatever an agent left
        if kind.cli is not None:
            real_dir(path / kind.cli.state)
    os.chmod(path, 0o700)
    return path


TRANSCRIPTS = {k.cli.sessions for k in CLI_KINDS if k.cli is not None}  # the folders of each CLI's sessions


def transcript(config: Config, role: str, session: str) -> str:
    """The agent CLI's own transcript of ``session``, in the role's CLI state: the newest file
    whose name holds the session id (Claude Code: ``projects/*/ID.jsonl``; Codex:
    ``sessions/…/rollout-…-ID.jsonl``) or its first eight characters (Gemini CLI:
    ``tmp/*/chats/session-…-ID8.json``); "" when none is there."""
    if not SESSION_ID.match(session or ""):
        return ""
    root = config.state.cli(role)
    found: list[tuple[float, str]] = []
    for key in (session, session[:8]):
        for path in root.rglob(f"*{key}*"):
            try:
                where = set(path.relative_to(root).parts[:-1])
                if (
                    where & TRANSCRIPTS
                    and path.is_file()
                    and not path.is_symlink()
                    and path.suffix in (".jsonl", ".json")
                ):
                    found.append((path.stat().st_mtime, str(path)))
            except OSError:
                continue
        if found:
            break
    return max(found)[1] if found else ""


class CommandBackend:
    acts = "shell"  # a CLI acting by shell commands: workflow-notify, workflow move, workflow finish

    def __init__(self, config: Config, opts: CommandConfig) -> None:
        self.config = config
        self.argv = list(opts.argv)
        self.timeout = opts.timeout
        self.model = opts.model
        self.contain = opts.contain
        self.resume = list(opts.resume)
        self.gone = re.compile(opts.resume_gone, re.IGNORECASE)

    def command(self, job: RunInput, plan: Plan) -> Launch:
        """The argv and the environment (beyond the run's) of the agent: ``argv`` as configured,
        with ``resume`` for a session and the model as WORKFLOW_MODEL."""
        env: dict[str, str] = {}
        if plan.model:
            env["WORKFLOW_MODEL"] = plan.model
        argv = self.argv
        if plan.session and self.resume:
            argv = argv + [a.replace("{session}", plan.session) for a in self.resume]
            env["WORKFLOW_SESSION"] = plan.session
        return Launch(argv, env)

    def read(self, out: str) -> Report:
        """What the agent's output says of its run."""
        return plain(out)

    def said(self, out: str, err: str) -> str:
        """Why the agent failed, as it said when it exited non-zero; "": its output as printed."""
        return ""

    def logged_out(self, why: str) -> str:
        """Our one line when the failure ``why`` is the CLI saying it is not logged in; else ""."""
        return ""

    def turns(self, report: Report, transcript: str) -> int:
        """The run's model turns (its output's; a CLI's profile may read them from its transcript)."""
        return report.turns

    def run(self, job: RunInput) -> RunResult:
        with ExitStack() as stack:
            tools_dir = job.run_dir / "agent" if job.run_dir is not None else None
            if tools_dir is None:  # a panel member, a reply: no run of its own, its (read-only) tools still served
                scratch = self.config.state.root / "tools"  # the owner's, never in a sandbox (its CLI state is)
                scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
                tools_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=scratch)))
            stack.enter_context(ToolServer(job.tools, tools_dir / TOOLS_SOCKET, job.deadline))
            return self._run(job, tools_dir)
        raise AssertionError("unreachable")  # ExitStack swallows nothing here

    def _run(self, job: RunInput, tools_dir: Path) -> RunResult:
        owner = agent_env(os.environ, self.config.runs.env)
        env = dict(owner)
        env.update(
            WORKFLOW_ROLE=job.role.name,
            WORKFLOW_MAIL_ROOT=str(self.config.mail_root),
            WORKFLOW_PROJECT=str(self.config.project_dir),
            WORKFLOW_CONFIG=str(self.config.path or self.config.project_dir / "workflow.toml"),
        )
        agent_dir = job.run_dir / "agent" if job.run_dir is not None else None
        env["WORKFLOW_TOOLS"] = str(tools_dir / TOOLS_SOCKET)
        if agent_dir is not None:
            env.update(WORKFLOW_RUN=str(agent_dir), WORKFLOW_HANDED=str(agent_dir / "handed"))
        if job.token:
            env.update(WORKFLOW_TOKEN=job.token, WORKFLOW_SMTP=job.smtp)
        else:
            env["WORKFLOW_NO_CREDENTIAL"] = f"{job.role.name} runs without a credential: the panel sends for it"
        if job.new_mail_file is not None:
            env["WORKFLOW_NEW_MAIL"] = str(job.new_mail_file)
        # this install's `workflow` and `workflow-notify` first: an owner's PATH without them (agentd
        # under systemd, pipx, `uv tool`) must not leave the agent's calls "not found"
        scripts = sysconfig.get_path("scripts")
        env["PATH"] = os.pathsep.join(p for p in (scripts, env.get("PATH", os.defpath)) if p)
        role_address = f"{job.role.name}@{self.config.domain}"  # its commits are the role's, never the owner's
        env.update(
            GIT_AUTHOR_NAME=job.role.name,
            GIT_AUTHOR_EMAIL=role_address,
            GIT_COMMITTER_NAME=job.role.name,
            GIT_COMMITTER_EMAIL=role_address,
        )
        cli = cli_state(self.config, job.role.name)
        # every CLI's state variable names its folder in the role's own (a CLI the agent starts itself too)
        env.update({k.cli.state_env: str(cli / k.cli.state) for k in CLI_KINDS if k.cli is not None})
        sandboxed = status(self.config).enforced
        plan = Plan(
            str(tools_dir / TOOLS_SOCKET),
            cli,
            job.model or self.model,
            job.role.max_turns or job.max_turns,
            job.session if SESSION_ID.match(job.session) else "",
            job.tools.read_only,
            sandboxed,
            owner,
        )
        argv, extra = self.command(job, plan)
        env.update(extra)
        timeout = self.timeout
        if job.deadline is not None:
            timeout = min(timeout, max(0.0, job.deadline - time.monotonic()))
        if sandboxed and "/" not in argv[0]:  # the sandbox has no PATH of ours: name the program's file
            found = shutil.which(argv[0], path=env.get("PATH"))
            if found is None:
                return RunResult(False, "", f"cannot start {argv[0]}: not found on PATH")
            argv = [os.path.realpath(found), *argv[1:]]
        mode = choose("bwrap" if sandboxed else self.contain)
        try:
            view_args = view(self.config, argv, tools_dir, job.tools.read_only, cli) if sandboxed else []
        except ConfigError as e:  # the control plane cannot be guarded: the agent never starts
            return RunResult(False, "", f"refusing to start {argv[0]}: {e}")
        return self._spawn(job, argv, mode, env, view_args, timeout)

    def _spawn(
        self, job: RunInput, argv: list[str], mode: Any, env: dict[str, str], view_args: list[str], timeout: float
    ) -> RunResult:
        # what it prints goes to files, read back capped: an agent printing gigabytes costs run-role no memory
        with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
            try:
                agent = Contained(
                    argv,
                    mode,
                    job.run_dir,
                    stdin=subprocess.PIPE,
                    stdout=stdout.fileno(),
                    stderr=stderr.fileno(),
                    cwd=self.config.project_dir,
                    env=env,
                    view=view_args,
                )
            except OSError as e:
                return RunResult(False, "", f"cannot start {argv[0]}: {e}")
            return self._wait(agent, job, argv, mode, timeout, stdout, stderr)

    def _wait(
        self,
        agent: Contained,
        job: RunInput,
        argv: list[str],
        mode: Any,
        timeout: float,
        stdout: IO[bytes],
        stderr: IO[bytes],
    ) -> RunResult:
        try:
            agent.communicate(job.prompt, timeout=timeout)
            out, err = printed(stdout), printed(stderr)
        except subprocess.TimeoutExpired:
            agent.kill()
            return RunResult(
                False,
                "",
                f"{argv[0]} timed out after {timeout:.0f}s; it and everything it started were killed ({mode.name})",
            )
        except BaseException:
            agent.kill()  # interrupted (SIGINT, SIGTERM): the agent goes with the run
            raise
        agent.close()
        code = agent.proc.returncode
        if code != 0:  # why, as the CLI says it (Codex: a turn.failed; Gemini: its error object), else its tail
            said = self.said(out, err) or (self.read(out).failed if out.strip() else "")
            why = said or (err or out).strip()[-TAIL:]
            if self.logged_out(why):  # its advice (/login) and its JSON help nobody: how to give a credential
                return RunResult(False, "", self.logged_out(why))
            gone = bool(job.session) and self.gone.search(f"{why}\n{err[-TAIL:]}") is not None
            return RunResult(False, out[-TAIL:], f"{argv[0]} exited with status {code}: {why}", session_gone=gone)
        report = self.read(out)
        usage = {**report.usage, **({"cost_microusd": round(report.cost_usd * 1e6)} if report.cost_usd else {})}
        path = transcript(self.config, job.role.name, report.session)
        turns, kept = self.turns(report, path), (report.session, report.calls, path)
        if report.failed and self.logged_out(report.failed):
            return RunResult(False, "", self.logged_out(report.failed), usage, turns, *kept)
        if report.failed:
            return RunResult(False, report.summary[-TAIL:], report.failed, usage, turns, *kept)
        return RunResult(True, report.summary[-TAIL:].strip() or "done", "", usage, turns, *kept)


class CliBackend(CommandBackend):
    """An agent CLI driven by its profile (``profiles``): the role's tools by MCP, its output read."""

    acts = "mcp"

    def __init__(self, config: Config, name: str) -> None:
        opts = config.backends.cli(name)
        super().__init__(
            config,
            CommandConfig((opts.program or PROFILES[name].kind.program,), opts.timeout, opts.model, opts.contain),
        )
        self.profile = PROFILES[name]
        self.opts = opts
        self.gone = re.compile(data(self.profile).gone)

    def command(self, job: RunInput, plan: Plan) -> Launch:
        return self.profile.launch(self.opts, plan)

    def read(self, out: str) -> Report:
        return self.profile.report(out)

    def said(self, out: str, err: str) -> str:
        return self.profile.said(out, err)

    def logged_out(self, why: str) -> str:
        return logged_out(self.profile.kind.name, why)

    def turns(self, report: Report, transcript: str) -> int:
        return self.profile.turns(report, transcript)
