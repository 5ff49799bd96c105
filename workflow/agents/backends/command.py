"""Command backend: run an agent CLI with the prompt on stdin; its exit status decides success.

``[backends.command] argv = ["claude", "-p"]`` (any CLI that reads a prompt on stdin). The agent
gets WORKFLOW_ROLE, WORKFLOW_MAIL_ROOT, WORKFLOW_PROJECT and WORKFLOW_CONFIG so it can call
``workflow-notify`` and ``workflow move`` itself; WORKFLOW_RUN, which makes those calls stage
their mail in the run (sent only if the run succeeds; moves reverted if it fails); WORKFLOW_HANDED,
a file listing the Message-IDs handed to the run; and WORKFLOW_NEW_MAIL, a file where mail that
arrives during the run is appended. The agent is contained (``contain``): when it exits, times
out, or its run-role is interrupted or killed, nothing it started survives.
"""

from __future__ import annotations

import os
import subprocess
import time

from workflow.agents.backends.base import RunInput, RunResult
from workflow.agents.contain import Contained, choose
from workflow.core.config import CommandConfig, Config

TAIL = 4000


class CommandBackend:
    def __init__(self, config: Config, opts: CommandConfig) -> None:
        self.config = config
        self.argv = list(opts.argv)
        self.timeout = opts.timeout
        self.model = opts.model
        self.contain = opts.contain

    def run(self, job: RunInput) -> RunResult:
        env = dict(os.environ)
        env.update(
            WORKFLOW_ROLE=job.role.name,
            WORKFLOW_MAIL_ROOT=str(self.config.mail_root),
            WORKFLOW_PROJECT=str(self.config.project_dir),
            WORKFLOW_CONFIG=str(self.config.path or self.config.project_dir / "workflow.toml"),
        )
        if job.run_dir is not None:
            env.update(WORKFLOW_RUN=str(job.run_dir), WORKFLOW_HANDED=str(job.run_dir / "handed"))
        if job.new_mail_file is not None:
            env["WORKFLOW_NEW_MAIL"] = str(job.new_mail_file)
        if job.model or self.model:
            env["WORKFLOW_MODEL"] = job.model or self.model
        timeout = self.timeout
        if job.deadline is not None:
            timeout = min(timeout, max(0.0, job.deadline - time.monotonic()))
        mode = choose(self.contain)
        try:
            agent = Contained(
                self.argv,
                mode,
                job.run_dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.config.project_dir,
                env=env,
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
        return RunResult(True, out[-TAIL:].strip() or "done")
