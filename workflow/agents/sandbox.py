"""Sandbox: what a command-backend agent (or a panel member) can see — its project, nothing of the mail.

Under ``[runs] sandbox = "bwrap"`` (the default) the agent runs in bubblewrap with a filesystem
built from a list, not from ``/`` minus exceptions:

* the system, read-only (``/usr``, ``/etc``, ``/opt``, the ``/bin`` and ``/lib`` links), and the
  Python and workflow-mail it needs to call ``workflow-notify`` and ``workflow move``;
* the project's working tree, writable (read-only for a panel member), and ``[runs] readable`` /
  ``writable`` (nothing of the owner's home by default) — but never the owner's control plane
  inside it (``control_plane``: the config, roles, templates, git's hooks and config stay
  read-only, so nothing the agent writes is run or obeyed by the owner's processes);
* the runs' servers' Unix sockets, read-only (``$WORKFLOW_SMTP`` is one: it can connect, and
  cannot put a socket of its own in their place; the owner's socket is not there — ``delivery.local``);
* the one directory of its run it may see (``$WORKFLOW_RUN``), and the role's own agent-CLI
  state (``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME`` under ``<state>/cli/ROLE``): never the owner's
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
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import workflow
from workflow.agents.contain import bwrap_works
from workflow.core import runmark
from workflow.core.config import Config
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


def control_plane(config: Config, project: Path) -> list[str]:
    """bubblewrap's arguments that keep the owner's control files read-only inside a writable
    project: ``workflow.toml``, ``roles/``, ``email-templates/``, ``.workflow/``, and git's
    ``hooks/``, ``config`` and ``info/``. Each is a mount point, so it can be neither written,
    renamed over nor removed; ``.git`` itself is bound too, so it cannot be renamed away and
    replaced by one of the agent's making. The agent still writes objects, refs and the index:
    it can commit. A control directory that does not exist yet is made (empty) first, so the
    agent cannot create it."""
    args: list[str] = []
    git = project / ".git"
    if git.is_dir() and not git.is_symlink():
        args += ["--bind", str(git), str(git)]
        (git / "hooks").mkdir(exist_ok=True)
        (git / "info").mkdir(exist_ok=True)
        args += [
            a for sub in GIT_CONTROL if (git / sub).exists() for a in ("--ro-bind", str(git / sub), str(git / sub))
        ]
    for path, make in (
        (config.path, False),
        (config.roles_dir, True),
        (config.templates_dir, True),
        (project / ".workflow", False),
    ):
        if path is None:
            continue
        path = Path(path).absolute()
        if not _inside(path, [project]) or path == project or path.is_symlink():
            continue
        if make and not path.exists():
            path.mkdir(parents=True, exist_ok=True)
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
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
    role's own agent-CLI state directory (writable, even for a panel member)."""
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
    bound: list[Path] = []
    for path in readable:
        args += ["--ro-bind", str(path), str(path)]
        bound.append(path)
    args += ["--ro-bind" if read_only else "--bind", str(project), str(project)]
    bound.append(project)
    if not read_only:
        args += control_plane(config, project)
    for path in writable:
        args += ["--bind", str(path), str(path)]
        bound.append(path)
    hidden = {h.resolve() for h in (config.mail_root, config.state.root, owner_file().parent) if h.exists()}
    hidden = {h for h in hidden if _inside(h, bound) and not _inside(h, [o for o in hidden if o != h])}
    for h in sorted(hidden):
        args += ["--tmpfs", str(h)]
    if run_dir is not None:
        args += ["--bind", str(run_dir.resolve()), str(run_dir.resolve())]
        sockets = config.state.run_sockets  # the runs' servers' sockets, reached but never replaced (delivery.local)
        sockets.mkdir(mode=0o700, parents=True, exist_ok=True)
        args += ["--ro-bind", str(sockets.resolve()), str(sockets.resolve())]
    if cli_state is not None:
        args += ["--bind", str(cli_state.resolve()), str(cli_state.resolve())]
    for h in sorted(hidden):  # empty and read-only: nothing written there lands anywhere, or seems to
        args += ["--remount-ro", str(h)]
    return [*args, "--chdir", str(project)]
