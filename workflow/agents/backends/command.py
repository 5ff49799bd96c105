"""Command backend: run an agent CLI with the prompt on stdin; its exit status decides success.

``[backends.command] argv = ["claude", "-p"]`` (any CLI that reads a prompt on stdin). The agent
gets WORKFLOW_ROLE, WORKFLOW_MAIL_ROOT, WORKFLOW_PROJECT and WORKFLOW_CONFIG so it can call
``workflow-notify`` and ``workflow move`` itself, and WORKFLOW_NEW_MAIL: a file where mail that
arrives during the run is appended. The process runs in its own process group; on timeout the
whole group is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess

from workflow.agents.backends.base import RunInput, RunResult
from workflow.core.config import CommandConfig, Config

TAIL = 4000


class CommandBackend:
    def __init__(self, config: Config, opts: CommandConfig) -> None:
        self.config = config
        self.argv = list(opts.argv)
        self.timeout = opts.timeout
        self.model = opts.model

    def run(self, job: RunInput) -> RunResult:
        env = dict(os.environ)
        env.update(
            WORKFLOW_ROLE=job.role.name,
            WORKFLOW_MAIL_ROOT=str(self.config.mail_root),
            WORKFLOW_PROJECT=str(self.config.project_dir),
            WORKFLOW_CONFIG=str(self.config.path or self.config.project_dir / "workflow.toml"),
        )
        if job.new_mail_file is not None:
            env["WORKFLOW_NEW_MAIL"] = str(job.new_mail_file)
        if job.model or self.model:
            env["WORKFLOW_MODEL"] = job.model or self.model
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.config.project_dir,
                env=env,
                start_new_session=True,
                text=True,
            )
        except OSError as e:
            return RunResult(False, "", f"cannot start {' '.join(self.argv)}: {e}")
        try:
            out, err = proc.communicate(job.prompt, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            return RunResult(
                False, out[-TAIL:], f"{self.argv[0]} timed out after {self.timeout:.0f}s; its process group was killed"
            )
        if proc.returncode != 0:
            detail = (err or out).strip()[-TAIL:]
            return RunResult(False, out[-TAIL:], f"{self.argv[0]} exited with status {proc.returncode}: {detail}")
        return RunResult(True, out[-TAIL:].strip() or "done")
