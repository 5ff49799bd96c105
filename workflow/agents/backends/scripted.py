"""Scripted backend: perform the steps of a TOML script through the role's tools — no model, no network.

The script is ``--script FILE``, else ``[backends.scripted] script``, else ``DIR/<role>.toml``
(``[backends.scripted] dir``, default ``scripted/``). Each ``[[step]]`` is one of::

    tool = "move_artifact"  + the tool's arguments (artifact, state, reason)
    tool = "send_message"   + event, artifact, to, variables; in_reply_to = "$first" | "$last" | an id
    tool = "write_artifact" + path, content
    say = "text"            (appended to the run's summary; in -i sessions, the next reply)
    fail = "why"            (the run fails here, as a crashed agent would)
    tool = "finish"         + status, summary (a script that reaches its end finishes as "done")
    sleep = 0.5             (seconds; to test long runs)
    usage = { input_tokens = 1000, output_tokens = 50 }   (reported like a model's usage, for budgets)

A refused tool call fails the run with the refusal. With ``record_dir`` set, every prompt the
backend receives is saved there, so tests can prove what a run did (and did not) see.
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import Any

from workflow.agents.backends.base import RunInput, RunResult
from workflow.core import beneath
from workflow.core.config import Config, ScriptedConfig
from workflow.core.errors import ArtifactError, ConfigError, ToolError

MAX_SCRIPT = 4 << 20  # bytes of one script


class ScriptedBackend:
    acts = "tools"  # we call its tools for it

    def __init__(self, config: Config, opts: ScriptedConfig, script: Path | None) -> None:
        self.config = config
        self.opts = opts
        self.script = script

    def _script_path(self, role: str) -> Path:
        if self.script is not None:
            return self.script
        if self.opts.script:
            return self.config.project_dir / self.opts.script
        return self.config.project_dir / self.opts.dir / f"{role}.toml"

    def _read(self, path: Path) -> str:
        """A script: one given on the command line as named; one in the project through no symlink
        (another run's agent may swap its folder for a link to the owner's files)."""
        project = self.config.project_dir
        if self.script is not None or not path.is_relative_to(project):
            return path.read_text(encoding="utf-8")
        rel = path.relative_to(project).as_posix()
        try:
            return beneath.read(self.config.project_dir, rel, MAX_SCRIPT)[0].decode("utf-8")
        except beneath.UnreachableError:
            raise FileNotFoundError(rel) from None

    def load(self, role: str) -> list[dict[str, Any]]:
        path = self._script_path(role)
        try:
            data = tomllib.loads(self._read(path))
        except (FileNotFoundError, ArtifactError):
            raise ConfigError(f"{path}: no script for {role} (the scripted backend needs one; see --script)") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from None
        steps = data.get("step", [])
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise ConfigError(f"{path}: expected [[step]] tables")
        return steps

    def record(self, job: RunInput) -> None:
        if not self.opts.record_dir:
            return
        stamp = f"{time.time():.6f}"
        rel = f"{Path(self.opts.record_dir).as_posix().strip('/')}/{job.role.name}-{stamp}.prompt.md"
        beneath.write(self.config.project_dir, rel, job.prompt.encode("utf-8"), durable=False)

    def run(self, job: RunInput) -> RunResult:
        self.record(job)
        try:
            steps = self.load(job.role.name)
        except ConfigError as e:
            return RunResult(False, "", str(e))
        said: list[str] = []
        usage = {"input_tokens": 0, "output_tokens": 0}
        for i, step in enumerate(steps, 1):
            if job.deadline is not None and time.monotonic() >= job.deadline:
                return RunResult(False, "\n".join(said), f"scripted step {i}: the run's time is up", usage, turns=i)
            if isinstance(step.get("usage"), dict):
                for k in usage:
                    usage[k] += int(step["usage"].get(k, 0))
            if "sleep" in step:
                wanted = float(step["sleep"])
                left = wanted if job.deadline is None else max(0.0, job.deadline - time.monotonic())
                time.sleep(min(wanted, left))
                if left < wanted:
                    return RunResult(False, "\n".join(said), f"scripted step {i}: the run's time is up", usage, turns=i)
                for text in job.poll():
                    said.append(f"(new mail during the run) {text.splitlines()[0] if text else ''}")
            if "say" in step:
                said.append(str(step["say"]))
            if "fail" in step:
                return RunResult(False, "\n".join(said), f"scripted step {i}: {step['fail']}", usage, turns=i)
            if "tool" in step:
                args = {k: v for k, v in step.items() if k != "tool"}
                if args.get("in_reply_to") in ("$first", "$last"):
                    if not job.messages:
                        return RunResult(
                            False, "\n".join(said), f"scripted step {i}: {args['in_reply_to']} but no new mail", turns=i
                        )
                    pick = job.messages[0] if args["in_reply_to"] == "$first" else job.messages[-1]
                    args["in_reply_to"] = pick.message_id
                try:
                    out = job.tools.call(str(step["tool"]), args)
                    said.append(f"{step['tool']}: {out.splitlines()[0] if out else 'ok'}")
                except ToolError as e:
                    return RunResult(
                        False, "\n".join(said), f"scripted step {i} ({step['tool']}) refused: {e}", turns=i
                    )
        if job.tools.finished is None:  # a script that ran to its end finishes as done (unless it said otherwise)
            job.tools.call("finish", {"status": "done", "summary": "\n".join(said) or "done"})
        return RunResult(True, "\n".join(said) or "done", usage=usage if any(usage.values()) else {}, turns=len(steps))

    def replies(self, role: str) -> list[str]:
        """The ``say`` lines of the script, for interactive sessions."""
        return [str(s["say"]) for s in self.load(role) if "say" in s]


def dumps(steps: list[dict[str, Any]]) -> str:
    """A script as TOML text (for the demo and tests that write scripts)."""
    out = []
    for s in steps:
        out.append("[[step]]")
        for k, v in s.items():
            if isinstance(v, dict):
                inner = ", ".join(f"{kk} = {json.dumps(vv)}" for kk, vv in v.items())
                out.append(f"{k} = {{ {inner} }}")
            else:
                out.append(f"{k} = {json.dumps(v)}")
        out.append("")
    return "\n".join(out)
