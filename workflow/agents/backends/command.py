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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def reported(out: str) -> tuple[str, str]:
    """(summary, session) from an agent's output: a JSON object with ``session_id`` (and
    ``result``), or a ``WORKFLOW_SESSION=`` line (removed from the summary); else (out, "")."""
    text = out.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and SESSION_ID.match(str(data.get("session_id") or "")):
            return str(data.get("result") or "").strip() or "done", str(data["session_id"])
    m = SESSION_LINE.search(out)
    if m:
        return SESSION_LINE.sub("", out).strip() or "done", m.group(1)
    return text, ""


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
        summary, session = reported(out)
        return RunResult(True, summary[-TAIL:].strip() or "done", session=session)
