"""Command backend: run an agent CLI with the prompt on stdin; its exit status decides success.

``[backends.command] argv = ["claude", "-p"]`` (any CLI that reads a prompt on stdin). The agent
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

import json
import os
import re
import shutil
import subprocess
import sysconfig
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from workflow.agents.backends.base import RunInput, RunResult
from workflow.agents.contain import Contained, choose
from workflow.agents.sandbox import status, view
from workflow.core.config import CommandConfig, Config

TAIL = 4000
INHERITED_NOT = (
    "WORKFLOW_TOKEN",
    "WORKFLOW_RUN",
    "WORKFLOW_SMTP",
    "WORKFLOW_HANDED",
    "WORKFLOW_NEW_MAIL",
    "WORKFLOW_SESSION",
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
    for sub in ("claude", "codex"):
        (path / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


SESSION_LINE = re.compile(r"^WORKFLOW_SESSION=([A-Za-z0-9._:-]{1,200})\s*$", re.M)
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")


class Report(NamedTuple):
    """What an agent's output says of its run: a summary, a session to resume, and — when the
    CLI itself reported one — why the run did not do its work ("" when it did not say)."""

    summary: str
    session: str = ""
    failed: str = ""
    usage: Mapping[str, int] = MappingProxyType({})  # input_tokens, output_tokens: what agentd counts


def _result(text: str) -> dict[str, object] | None:
    """The CLI's result object: the whole output as JSON (Claude Code's ``--output-format json``)
    or, for a stream of JSON lines (``stream-json``), its last ``"type": "result"`` line."""
    candidates = [text] if text.startswith("{") else []
    candidates += [ln for ln in reversed(text.splitlines()) if ln.startswith('{"type":"result"')]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def reported(out: str) -> Report:
    """What an agent's output says: a result object with ``session_id`` (and ``result``,
    ``is_error``, ``permission_denials``: Claude Code's), or a ``WORKFLOW_SESSION=`` line
    (removed from the summary); else the output as the summary."""
    text = out.strip()
    data = _result(text)
    if data is not None and ("session_id" in data or "is_error" in data):
        session = str(data.get("session_id") or "")
        summary = str(data.get("result") or "").strip() or "done"
        raw = data.get("usage")
        usage = {
            k: int(raw[k])
            for k in ("input_tokens", "output_tokens")
            if isinstance(raw, dict) and isinstance(raw.get(k), int)
        }
        return Report(summary, session if SESSION_ID.match(session) else "", _failure(data), usage)
    m = SESSION_LINE.search(out)
    if m:
        return Report(SESSION_LINE.sub("", out).strip() or "done", m.group(1))
    return Report(text)


def _failure(data: dict[str, object]) -> str:
    """Why a CLI's result object says the run did not do its work, or ""."""
    denied = data.get("permission_denials")
    if isinstance(denied, list) and denied:
        names = []
        for d in denied[:5]:
            call = d if isinstance(d, dict) else {}
            arguments = call.get("tool_input") if isinstance(call.get("tool_input"), dict) else {}
            detail = str(arguments.get("command") or arguments.get("file_path") or "")[:80]  # type: ignore[union-attr]
            names.append(f"{call.get('tool_name', '?')}({detail})" if detail else str(call.get("tool_name", "?")))
        return (
            f"the agent CLI denied {len(denied)} tool call(s) the agent made: {', '.join(names)} — allow them "
            "in the CLI's arguments (its -p mode denies every tool not allowed); nothing of the run is kept"
        )
    if data.get("is_error") is True or data.get("subtype") not in (None, "success"):
        why = str(data.get("result") or data.get("subtype") or "an error")[:300]
        return f"the agent CLI reported an error: {why}"
    return ""


class CommandBackend:
    def __init__(self, config: Config, opts: CommandConfig) -> None:
        self.config = config
        self.argv = list(opts.argv)
        self.timeout = opts.timeout
        self.model = opts.model
        self.contain = opts.contain
        self.resume = list(opts.resume)

    def run(self, job: RunInput) -> RunResult:
        env = agent_env(os.environ, self.config.runs.env)
        env.update(
            WORKFLOW_ROLE=job.role.name,
            WORKFLOW_MAIL_ROOT=str(self.config.mail_root),
            WORKFLOW_PROJECT=str(self.config.project_dir),
            WORKFLOW_CONFIG=str(self.config.path or self.config.project_dir / "workflow.toml"),
        )
        agent_dir = job.run_dir / "agent" if job.run_dir is not None else None
        if agent_dir is not None:
            env.update(WORKFLOW_RUN=str(agent_dir), WORKFLOW_HANDED=str(agent_dir / "handed"))
        if job.token:
            env.update(WORKFLOW_TOKEN=job.token, WORKFLOW_SMTP=job.smtp)
        else:
            env["WORKFLOW_NO_CREDENTIAL"] = f"{job.role.name} runs without a credential: the panel sends for it"
        if job.new_mail_file is not None:
            env["WORKFLOW_NEW_MAIL"] = str(job.new_mail_file)
        if job.model or self.model:
            env["WORKFLOW_MODEL"] = job.model or self.model
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
        env.update(CLAUDE_CONFIG_DIR=str(cli / "claude"), CODEX_HOME=str(cli / "codex"))
        argv = self.argv
        if job.session and self.resume and SESSION_ID.match(job.session):
            argv = argv + [a.replace("{session}", job.session) for a in self.resume]
            env["WORKFLOW_SESSION"] = job.session
        timeout = self.timeout
        if job.deadline is not None:
            timeout = min(timeout, max(0.0, job.deadline - time.monotonic()))
        sandboxed = status(self.config).enforced
        if sandboxed and "/" not in argv[0]:  # the sandbox has no PATH of ours: name the program's file
            found = shutil.which(argv[0], path=env.get("PATH"))
            if found is None:
                return RunResult(False, "", f"cannot start {argv[0]}: not found on PATH")
            argv = [os.path.realpath(found), *argv[1:]]
        mode = choose("bwrap" if sandboxed else self.contain)
        view_args = view(self.config, argv, agent_dir, job.tools.read_only, cli) if sandboxed else []
        try:
            agent = Contained(
                argv,
                mode,
                job.run_dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.config.project_dir,
                env=env,
                view=view_args,
            )
        except OSError as e:
            return RunResult(False, "", f"cannot start {' '.join(self.argv)}: {e}")
        try:
            out, err = agent.communicate(job.prompt, timeout=timeout)
        except subprocess.TimeoutExpired:
            agent.kill()
            return RunResult(
                False,
                "",
                f"{self.argv[0]} timed out after {timeout:.0f}s; it and everything it "
                f"started were killed ({mode.name})",
            )
        except BaseException:
            agent.kill()  # interrupted (SIGINT, SIGTERM): the agent goes with the run
            raise
        agent.close()
        code = agent.proc.returncode
        if code != 0:
            detail = (err or out).strip()[-TAIL:]
            return RunResult(False, out[-TAIL:], f"{self.argv[0]} exited with status {code}: {detail}")
        report = reported(out)
        if report.failed:
            return RunResult(False, report.summary[-TAIL:], report.failed, report.usage, session=report.session)
        return RunResult(True, report.summary[-TAIL:].strip() or "done", usage=report.usage, session=report.session)
