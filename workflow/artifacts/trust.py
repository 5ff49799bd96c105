"""Trust: the files the owner's processes take policy or code from, as the owner last approved
them — and what has changed since.

workflow.toml, ``roles/``, ``email-templates/``, every file the config names (``core.control``:
the people's logins, TLS certificates, the agents' programs…) and git's ``config``, ``hooks/``
and ``info/`` decide what every later run, delivery and git command of the owner does. A run's agent cannot
write them (the sandbox binds them read-only), but they also change by ``git pull``, by a
teammate's commit, by a tool, or by an agent that ran before the sandbox did. ``approve``
records each file's SHA-256 in ``<state>/trusted.json`` (``workflow trust``, and ``workflow
init`` for what it writes); ``changes`` lists what differs from that record, which ``workflow
doctor`` reports until the owner has read it and approved it again — in the spirit of direnv's
``allow``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from workflow.artifacts import agentfiles
from workflow.core import control
from workflow.core.config import CONFIG_NAME, Config
from workflow.core.files import write_atomic

GIT_CONTROL = (".git/config", ".git/hooks", ".git/info")
MAX_FILES = 10_000  # files looked at, at most, under one control folder


def _record(config: Config) -> Path:
    return config.state.root / "trusted.json"


def watched(config: Config) -> dict[str, str]:
    """Project-relative path → SHA-256 of every control file now (symlinks and other odd entries
    as ``"<symlink>"``/``"<not a file>"``: git's and our code never follow them, a person should
    know they are there)."""
    project = config.project_dir
    out: dict[str, str] = {}
    for rel in [*control.inside(config), *GIT_CONTROL]:
        root = project / rel
        todo = [root]
        while todo and len(out) < MAX_FILES * 4:
            path = todo.pop()
            try:
                st = os.lstat(path)
            except OSError:
                continue
            name = path.relative_to(project).as_posix()
            if stat.S_ISDIR(st.st_mode):
                if path == project / ".workflow" or name.startswith(".workflow/"):
                    continue  # a mail root's state inside the project: written all the time
                todo.extend(sorted(path.iterdir(), reverse=True)[:MAX_FILES])
            elif stat.S_ISREG(st.st_mode):
                if name.startswith(".git/hooks/") and name.endswith(".sample"):
                    continue  # git's examples: never run
                out[name] = agentfiles.digest(path)
            else:
                out[name] = "<symlink>" if stat.S_ISLNK(st.st_mode) else "<not a file>"
    return out


def approved(config: Config) -> dict[str, str] | None:
    """The record (None: the owner never approved anything here)."""
    try:
        data = json.loads(_record(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def approve(config: Config, paths: list[str] | None = None) -> dict[str, str]:
    """Record the control files as they are now — all of them, or only ``paths`` (what a
    command of ours just wrote: ``workflow hooks install``). Returns what was recorded."""
    now = watched(config)
    if paths is None:
        record = now
    else:
        known = approved(config)
        if known is None:
            return {}  # never approved: that stays for the owner to do, whole
        record = dict(known)
        for p in paths:
            if p in now:
                record[p] = now[p]
            else:
                record.pop(p, None)
    write_atomic(_record(config), json.dumps(record, indent=1, sort_keys=True), mode=0o600)
    return record


class Change(NamedTuple):
    """One control file that differs from what the owner approved."""

    path: str
    how: str  # "changed" | "new" | "removed"

    def __str__(self) -> str:
        return f"{self.path} ({self.how})"


def changes(config: Config) -> list[Change] | None:
    """What differs from the owner's record (None: there is no record yet)."""
    record = approved(config)
    if record is None:
        return None
    now = watched(config)
    out = [Change(p, "changed") for p in sorted(now) if p in record and record[p] != now[p]]
    out += [Change(p, "new") for p in sorted(now) if p not in record]
    out += [Change(p, "removed") for p in sorted(record) if p not in now]
    return out


def stray_configs(config: Config) -> list[str]:
    """Project-relative paths of every workflow.toml in the project's tree but its own config: a
    run never writes one, and no command found below one uses it (``core.configfile.outer_config``),
    but a person should know it is there."""
    return [p for p in agentfiles.found(config) if PurePosixPath(p).name == CONFIG_NAME]
