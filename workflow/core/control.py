"""Control plane: every file and folder of the owner's that the config names — one list, read by all.

The owner's unsandboxed processes (run-role's commit and rollback, agentd, ``workflow smtpd``, the
cockpit, the bridges, the hooks, the owner's own commands) take policy, code or a secret from
``workflow.toml`` itself, ``roles/``, ``email-templates/``, ``.workflow/`` and every value a
section declares ``schema.Owned``: the people's logins (``[smtp] auth_users_file``), the TLS
certificates and keys of ``[smtp]`` and ``[web]``, a bridge's password file and token command,
the scripted backend's scripts, and the agents' programs with the files their argv names (one
role's agent must not rewrite what another role's run starts). ``named`` lists them; the sandbox
binds those inside the project read-only (``agents.sandbox``), a run's commits and index are
checked against them (``artifacts.edits``) and ``workflow trust`` records them — all from this
one list, so a key added to a section with ``Owned`` is guarded everywhere at once. (git's own
control files, ``.git/hooks``, ``config`` and ``info``, are git's layout: ``agents.sandbox``.)
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from workflow.core.config import CONFIG_NAME, Config
from workflow.core.schema import Owned, owned

MAKE, REFUSE, SKIP = "make", "refuse", "skip"  # what a missing one is: made (empty), a refusal, nothing


class Named(NamedTuple):
    """One file or folder the config names."""

    path: Path  # absolute, as the config names it (``~`` expanded, relative to the project; links not followed)
    key: str  # where the config names it: ``[smtp] auth_users_file``
    folder: bool
    secret: bool  # never shown to an agent (a TLS key, a password file), not only kept read-only
    missing: str  # MAKE: an empty folder is made first; REFUSE: no run starts while it is missing; SKIP


def _path(project: Path, value: str) -> Path:
    """A value as ``schema.absolute`` reads it: ``~`` expanded, relative to the project."""
    return Path(os.path.normpath(project / Path(value).expanduser()))


def _sections(config: Config) -> Iterator[tuple[str, object]]:
    """(section name, record) of every section that may hold ``Owned`` values, nested ones too."""
    b = config.backends
    yield from (("smtp", config.smtp), ("web", config.web))
    yield from (("backends.anthropic", b.anthropic), ("backends.command", b.command), ("backends.scripted", b.scripted))
    yield from ((f"backends.{name}", cli) for name, cli in sorted(b.clis.items()))
    todo: list[tuple[str, object]] = [(f"bridges.{name}", r) for name, r in sorted(config.bridges.items())]
    while todo:
        name, record = todo.pop(0)
        yield name, record
        for field in getattr(record, "_fields", ()):
            value = getattr(record, field)
            if hasattr(value, "_fields"):
                todo.append((f"{name}.{field}", value))
            elif isinstance(value, Mapping):
                todo += [(f"{name}.{field}.{k}", v) for k, v in value.items() if hasattr(v, "_fields")]


def _program(project: Path, key: str, word: str, secret: bool) -> list[Named]:
    """A command's program: a file of the project's when it names one with a ``/`` (found on PATH
    otherwise); missing, an agent could make it."""
    return [Named(_path(project, word), key, False, secret, REFUSE)] if "/" in word else []


def _given(project: Path, key: str, args: list[str], secret: bool) -> list[Named]:
    """The files an argv hands its program (``agent.py``): the arguments that name a file that
    exists (the others are options and values)."""
    out = []
    for arg in args:
        if arg and not arg.startswith("-") and os.path.isfile(_path(project, arg)):
            out.append(Named(_path(project, arg), key, False, secret, SKIP))
    return out


def _values(project: Path, key: str, spec: Owned, value: object) -> list[Named]:
    if isinstance(value, tuple):
        words = [str(v) for v in value]
    elif not isinstance(value, str) or not value:
        return []
    elif spec.form == "command":
        try:
            words = shlex.split(value)
        except ValueError:
            return []
    else:
        words = [value]
    if not words:
        return []
    if spec.form in ("file", "folder"):
        folder = spec.form == "folder"
        return [Named(_path(project, words[0]), key, folder, spec.secret, MAKE if folder else REFUSE)]
    if spec.form == "program":
        return _program(project, key, words[0], spec.secret)
    if spec.form in ("command", "argv"):  # its program first
        return _program(project, key, words[0], spec.secret) + _given(project, key, words[1:], spec.secret)
    return _given(project, key, words, spec.secret)  # args: for a program named elsewhere


def named(config: Config) -> list[Named]:
    """Every file and folder the config names, wherever it lies."""
    project = config.project_dir.absolute()
    out = [Named(Path(config.path).absolute(), CONFIG_NAME, False, False, SKIP)] if config.path is not None else []
    out += [
        Named(Path(config.roles_dir).absolute(), "[workflow] roles_dir", True, False, MAKE),
        Named(Path(config.templates_dir).absolute(), "[workflow] templates_dir", True, False, MAKE),
        Named(project / ".workflow", ".workflow", True, False, SKIP),
    ]
    for section, record in _sections(config):
        for field, spec, value in owned(record):
            out += _values(project, f"[{section}] {field}", spec, value)
    unique: dict[Path, Named] = {}
    for n in out:
        was = unique.get(n.path)  # one path named twice (a program in two argvs) is listed once, secret if once
        unique[n.path] = n if was is None else was._replace(secret=was.secret or n.secret)
    return list(unique.values())


def relative(config: Config, path: Path) -> str | None:
    """``path`` relative to the project (POSIX), when it lies inside it — as named, or once its
    links are followed — else None. The project itself is not inside it."""
    project = config.project_dir.absolute()
    for top, p in ((project, Path(os.path.normpath(path))), (project.resolve(), Path(os.path.realpath(path)))):
        if p != top and p.is_relative_to(top):
            return p.relative_to(top).as_posix()
    return None


def inside(config: Config) -> list[str]:
    """Project-relative paths of the control plane's files and folders inside the project (what a
    run's commits and staged entries must not touch, what ``workflow trust`` records)."""
    out = []
    for n in named(config):
        rel = relative(config, n.path)
        if rel is not None and rel not in out:
            out.append(rel)
    return out
