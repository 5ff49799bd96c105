"""Sandbox: what a command-backend agent (or a panel member) can see — its project, nothing of the mail.

Under ``[runs] sandbox = "bwrap"`` (the default) the agent runs in bubblewrap with a filesystem
built from a list, not from ``/`` minus exceptions:

* the system, read-only (``/usr``, ``/etc``, ``/opt``, the ``/bin`` and ``/lib`` links), and the
  Python and workflow-mail it needs to call ``workflow-notify`` and ``workflow move``;
* the project's working tree, writable (read-only for a panel member), and ``[runs] readable`` /
  ``writable`` (of the owner's home, git's config files by default) — but never the owner's
  control plane inside them (``git_control``, ``control_plane``: the config, roles, templates,
  git's hooks and config and every file the config names — ``core.control`` — stay read-only,
  so nothing the agent writes is run or obeyed by the owner's processes; a secret the config
  names shows empty), never git's credential stores (``artifacts.credstores``: hidden);
* the runs' servers' Unix sockets, read-only (``$WORKFLOW_SMTP`` is one: it can connect, and
  cannot put a socket of its own in their place; the owner's socket is not there — ``delivery.local``);
* the one directory of its run it may see (``$WORKFLOW_RUN``), and the role's own agent-CLI
  state (each CLI's state variable — ``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME``, ``$GEMINI_CLI_HOME`` —
  under ``<state>/cli/ROLE``): never the owner's
  ``~/.claude`` (settings and hooks Claude Code obeys in the owner's own sessions), never
  another role's transcripts;
* no capability at all, even when the owner is root (``--cap-drop ALL``: with
  CAP_DAC_READ_SEARCH an agent could open a hidden file by its handle, through a bind mount);
* an empty ``$HOME``, ``/tmp`` and ``/var/tmp`` of its own, a ``/proc`` of its own PID namespace
  (it sees only its own processes), the network (it calls its model's API);
* the run mark, ``/.workflow-run`` (``core.runmark``), read-only and a mount point: whatever the
  agent does to its environment, every command it runs knows it is inside a run, and refuses to
  deliver mail directly into the sandbox's own view of the mail root.

Not there: the mail root (every Maildir, the index, the panels' sealed assessments, the queues,
the other runs' directories), the owner's credential file, other projects, other users' files.
Whatever is inside a visible path but must stay hidden (a mail root inside the project) gets an
empty read-only directory mounted over it. The sandbox dies with its run (``contain``).

Without bubblewrap, or with ``sandbox = "none"``, runs still work, but every boundary is advisory:
``status`` says so, and run-role, ``agentd status`` and ``workflow doctor`` print it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import workflow
from workflow.agents.contain import bwrap_works
from workflow.artifacts import credstores
from workflow.core import control, runmark
from workflow.core.config import Config
from workflow.core.errors import ConfigError
from workflow.core.resources import builtin_dir
from workflow.delivery.credentials import owner_file

SYSTEM = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/run/systemd/resolve")
ADVISORY = (
    "boundaries are advisory: an agent with a shell can read every mailbox and the owner's "
    "credential, and send as any role"
)


class Status(NamedTuple):
    enforced: bool
    line: str  # one line a user reads


def status(config: Config) -> Status:
    """Whether runs are sandboxed here, in one line."""
    if config.runs.sandbox == "none":
        return Status(False, f'[runs] sandbox = "none": {ADVISORY}')
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Status(False, f"bubblewrap is not installed (scripts/system-packages installs it): {ADVISORY}")
    if not bwrap_works(bwrap):
        return Status(False, f"bubblewrap cannot make namespaces here: {ADVISORY}")
    return Status(
        True, "runs are sandboxed (bubblewrap): an agent sees its project and its run, no mail, no credential"
    )


def _resolved(paths: Sequence[str | Path], base: Path) -> list[Path]:
    out = []
    for p in paths:
        path = Path(p).expanduser()
        path = path if path.is_absolute() else base / path
        if path.exists():
            out.append(path.resolve())
    return out


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


GIT_CONTROL = ("hooks", "config", "info")  # what git runs or obeys: the owner's, never the agent's
HIDDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hidden.txt")  # empty: what a secret shows


def git_control(project: Path) -> list[str]:
    """bubblewrap's arguments that keep git's own control files read-only inside a writable
    project: ``hooks/``, ``config`` and ``info/``, each a mount point, so it can be neither
    written, renamed over nor removed; ``.git`` itself is bound too, so it cannot be renamed away
    and replaced by one of the agent's making. The agent still writes objects, refs and the
    index: it can commit. ``hooks/`` and ``info/`` are made (empty) first when missing."""
    git = project / ".git"
    if not git.is_dir() or git.is_symlink():
        return []
    (git / "hooks").mkdir(exist_ok=True)
    (git / "info").mkdir(exist_ok=True)
    args = ["--bind", str(git), str(git)]
    return args + [
        a for sub in GIT_CONTROL if (git / sub).exists() for a in ("--ro-bind", str(git / sub), str(git / sub))
    ]


class Root(NamedTuple):
    """A folder the sandbox binds: as resolved, as named, and whether the agent may write it."""

    path: Path
    alias: Path
    writable: bool


def _under(path: Path, top: Path) -> bool:
    return path != top and path.is_relative_to(top)


def _found(n: control.Named, roots: Sequence[Root]) -> tuple[Root, Path] | None:
    """Where a named file lies in the sandbox: the innermost root holding it and its path there
    (with no link on the way), or None (the agent does not see it). A ConfigError when a link
    on its way lies where the agent writes: it could point the link at a file of its own."""
    lexical = Path(os.path.normpath(n.path))
    by_depth = sorted(roots, key=lambda r: len(r.path.parts), reverse=True)
    for root in by_depth:
        top = next((t for t in (root.alias, root.path) if _under(lexical, t)), None)
        if top is None or not root.writable:
            continue
        parts = lexical.relative_to(top).parts
        for i in range(1, len(parts) + 1):
            step = root.path.joinpath(*parts[:i])
            if os.path.islink(step):
                raise ConfigError(
                    f"{n.key} names {lexical}, reached through the symlink {step} in a folder agents write: an agent "
                    "could point it at a file of its own; make it a plain file or folder, or name what it points to"
                )
            if not os.path.lexists(step):
                break
        return root, root.path.joinpath(*parts)
    real = Path(os.path.realpath(lexical))
    holder = next((r for r in by_depth if _under(real, r.path)), None)
    return (holder, real) if holder is not None else None


def control_plane(config: Config, roots: Sequence[Root]) -> list[str]:
    """bubblewrap's arguments that keep the owner's control plane (``core.control``: the config,
    roles, templates, ``.workflow/``, every file the config names) read-only wherever the agent
    may write — each a mount point, and every folder on its way from the writable root too, so
    none can be written, renamed over or removed, nor moved away with its parent — and a secret
    (a TLS key, a password file) hidden wherever it is bound at all: an empty read-only file in
    its place. A missing folder is made (empty) first, so the agent cannot make it; a missing
    file is a ConfigError naming it (the agent could make it, and the owner's processes would
    take it as theirs)."""
    ways: dict[Path, None] = {}
    keep: dict[Path, None] = {}
    hide: dict[Path, None] = {}
    for n in control.named(config):
        hit = _found(n, roots)
        if hit is None:
            continue
        root, path = hit
        if not os.path.lexists(path):
            if not root.writable or n.missing == control.SKIP:
                continue
            if n.missing == control.REFUSE:
                raise ConfigError(
                    f"{n.key} names {path}, which does not exist: a run's agent could make it, and the owner's "
                    "processes would take it as theirs; create it (or correct the key) before a run starts"
                )
            path.mkdir(parents=True, exist_ok=True)
        if root.writable:
            parts = path.relative_to(root.path).parts
            ways.update((root.path.joinpath(*parts[:i]), None) for i in range(1, len(parts)))
            keep[path] = None
        if n.secret:
            hide[path] = None
    # read-only already (guarded, or readable inside a writable root: bound read-only again before)
    fixed = [
        *keep,
        *hide,
        *(r.path for r in roots if not r.writable and any(_under(r.path, w.path) for w in roots if w.writable)),
    ]
    args: list[str] = []
    for way in sorted(ways, key=lambda p: len(p.parts)):  # outer first
        if not any(way == f or _under(way, f) for f in fixed):
            args += ["--bind", str(way), str(way)]
    for path in sorted(keep, key=lambda p: len(p.parts)):
        args += ["--ro-bind", str(path), str(path)]
    return args + hidden(hide)


def hidden(paths: Iterable[Path]) -> list[str]:
    """bubblewrap's arguments that put an empty read-only file (or folder) in place of each of
    ``paths`` (which exist): what a secret shows an agent."""
    args: list[str] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if path.is_dir() and not path.is_symlink():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            args += ["--ro-bind", HIDDEN, str(path)]
    return args


def program_tree(program: str) -> list[str]:
    """What the agent's program needs beyond its own file: the whole ``node_modules`` it lies in
    (an npm CLI's launcher loads its platform package or bundle chunks beside it — Codex, Gemini
    CLI), and the node a ``#!/usr/bin/env node`` script runs, wherever it is installed (nvm)."""
    real = os.path.realpath(program)
    out = []
    for parent in Path(real).parents:
        if parent.name == "node_modules":
            out.append(str(parent))
            break
    try:
        with open(real, "rb") as f:
            first = f.readline(200)
    except OSError:
        first = b""
    if first.startswith(b"#!") and b"node" in first:
        node = shutil.which("node")
        if node is not None:
            out.append(str(Path(os.path.realpath(node)).parent.parent))  # its install: bin/ and lib/
    return out


def view(
    config: Config, argv: Sequence[str], run_dir: Path | None, read_only: bool, cli_state: Path | None = None
) -> list[str]:
    """bubblewrap's arguments (before ``--``) for one agent of this project; ``cli_state``: the
    role's own agent-CLI state directory (writable, even for a panel member). A ConfigError when
    the control plane cannot be guarded (``control_plane``): no run starts then."""
    args = ["--unshare-pid", "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-uts"]
    if os.geteuid() == 0:  # bubblewrap run by root keeps every capability unless told: the agent gets none
        args += ["--cap-drop", "ALL"]
    for d in SYSTEM:
        if os.path.lexists(d):
            args += ["--symlink", os.readlink(d), d] if os.path.islink(d) else ["--ro-bind", d, d]
    args += ["--ro-bind", runmark.TEXT, runmark.MARK]  # every process inside knows it is (core.runmark)
    home = Path.home()
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", str(home)]
    readable = _resolved(
        [
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            Path(workflow.__file__).parent,
            builtin_dir("roles"),
            builtin_dir("email-templates"),
            *[a for a in argv if a.startswith("/")],
            *(program_tree(argv[0]) if argv and argv[0].startswith("/") else []),
            *config.runs.readable,
        ],
        config.project_dir,
    )
    project = config.project_dir.resolve()
    writable = _resolved(list(config.runs.writable), project)
    roots = [Root(p, p, False) for p in readable]
    for path in readable:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind" if read_only else "--bind", str(project), str(project)]
    roots.append(Root(project, config.project_dir.absolute(), not read_only))
    if not read_only:
        args += git_control(project)
    for path in writable:
        args += ["--bind", str(path), str(path)]
        roots.append(Root(path, path, True))
    # after every writable bind, which would otherwise make them writable again: what is readable
    # inside the project (the owner's own Python and workflow-mail in a .venv there, which the
    # owner's processes run) and the control plane
    for path in readable:
        if any(_under(path, r.path) for r in roots if r.writable):
            args += ["--ro-bind", str(path), str(path)]
    args += control_plane(config, roots)
    stores = {Path(os.path.realpath(s)) for s in credstores.stores(project) if os.path.lexists(s)}
    args += hidden(s for s in stores if any(_under(s, r.path) or s == r.path for r in roots))
    bound = [r.path for r in roots]
    hidden_dirs = {h.resolve() for h in (config.mail_root, config.state.root, owner_file().parent) if h.exists()}
    hidden_dirs = {h for h in hidden_dirs if _inside(h, bound) and not _inside(h, [o for o in hidden_dirs if o != h])}
    for h in sorted(hidden_dirs):
        args += ["--tmpfs", str(h)]
    if run_dir is not None:
        args += ["--bind", str(run_dir.resolve()), str(run_dir.resolve())]
        sockets = config.state.run_sockets  # the runs' servers' sockets, reached but never replaced (delivery.local)
        sockets.mkdir(mode=0o700, parents=True, exist_ok=True)
        args += ["--ro-bind", str(sockets.resolve()), str(sockets.resolve())]
    if cli_state is not None:
        args += ["--bind", str(cli_state.resolve()), str(cli_state.resolve())]
    for h in sorted(hidden_dirs):  # empty and read-only: nothing written there lands anywhere, or seems to
        args += ["--remount-ro", str(h)]
    return [*args, "--chdir", str(project)]
