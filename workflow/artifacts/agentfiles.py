"""Agent files: what agent CLIs and the owner's tools obey from a project's working tree outside
the control plane — instructions (``CLAUDE.md``, ``AGENTS.md``, ``GEMINI.md``, … anywhere in the
tree), settings, skills, plugins and MCP servers (``.claude/``, ``.gemini/``, ``.codex/``,
``.agents/``, ``.cursor/``, the plugin folders, ``.mcp.json``), the environment a CLI loads from
the tree (``.env``: Gemini CLI takes from the first one up from its working directory any
variable its environment lacks — its API's base URL included), the ignore files that decide what
a CLI's tools see (``.geminiignore``, ripgrep's ``.ignore``/``.rgignore``), any ``workflow.toml``, and what the owner's git reads from the tree (``.gitattributes``,
``.gitignore``, ``.mailmap``, ``.gitmodules``). A run never writes them: one role's agent would
steer every later run of every role (and the owner's own agent session). ``NAMES`` and ``FOLDERS``
are the one list (``docs/threat-model.md`` says why each is there); an agent CLI's folders are its
record's (``core.backendkinds.Cli.folders``). (What the config names — the scripted
backend's scripts, the agents' programs — is the control plane, read-only in the sandbox:
``core.control``.)

``record`` keeps each one's bytes in the owner's part of the run directory when the run begins;
``changed`` names what differs when it ends (the run then fails); ``restore`` puts back what was
there and moves aside what the run added, for the owner to read.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from workflow.artifacts.gitstate import tree
from workflow.core import beneath
from workflow.core.backendkinds import CLI_KINDS
from workflow.core.config import CONFIG_NAME, Config
from workflow.core.files import write_atomic

NAMES = frozenset(
    {
        CONFIG_NAME,
        "CLAUDE.md",
        "CLAUDE.local.md",
        "AGENTS.md",
        "AGENTS.override.md",
        "GEMINI.md",
        ".mcp.json",
        ".cursorrules",
        ".windsurfrules",
        ".clinerules",
        "copilot-instructions.md",
        ".env",  # Gemini CLI's environment (GOOGLE_GEMINI_BASE_URL: where the owner's key goes)
        ".geminiignore",  # what Gemini CLI's tools skip
        ".ignore",  # ripgrep's, under Claude Code's and Codex's search: what another role's agent sees
        ".rgignore",
        ".cursorignore",
        ".worktreeinclude",  # the ignored files Claude Code copies into a worktree it makes
        ".lsp.json",  # language servers (commands) Claude Code starts
        ".gitattributes",  # what the owner's git diff and log show (``-diff``), and filters
        ".gitignore",  # what the owner's git status and add leave out: an artifact no commit holds
        ".mailmap",  # whose name the owner's git log puts on a commit
        ".gitmodules",
        ".lfsconfig",
    }
)
FOLDERS = frozenset(  # settings, skills and plugins, anywhere in the tree: each agent CLI's own …
    {
        *(folder for k in CLI_KINDS if k.cli is not None for folder in k.cli.folders),
        ".cursor",  # … and other tools' (the owner's own)
        ".agents",  # skills and plugin marketplaces Codex (and others) load from a repository
        ".cursor-plugin",
    }
)
MAX_KEPT = 1 << 20  # bytes of one file kept to put it back (a larger one is moved aside, never restored)
MANIFEST = "agent-files.json"


def digest(path: Path) -> str:
    """A file's SHA-256, read in pieces (``trust`` records control files by it too)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                h.update(chunk)
    except OSError as e:
        return f"<unreadable: {e.strerror}>"
    return h.hexdigest()


def _digest(config: Config, rel: str) -> str:
    """The SHA-256 of the project's file ``rel``, read through no symlink (``"<not a file>"`` for
    anything but a plain file: a symlink, a FIFO — never opened so that it could block)."""
    h = hashlib.sha256()
    try:
        with beneath.opened(config.project_dir, rel) as fd:
            for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
                h.update(chunk)
    except beneath.UnreachableError:
        return "<not a file>"
    except OSError as e:
        return f"<unreadable: {e.strerror}>"
    return h.hexdigest()


def found(config: Config) -> dict[str, str]:
    """Project-relative path → SHA-256 of every agent file now (the project's own config aside;
    anything but a plain file as ``"<not a file>"``, never opened: a FIFO would block)."""
    project = config.project_dir
    own = os.path.realpath(config.path) if config.path is not None else ""
    out: dict[str, str] = {}
    for root, _, files in tree(config):
        rel = Path(root).relative_to(project).as_posix()
        inside = bool(FOLDERS.intersection(rel.split("/")))
        for name in files if inside else NAMES.intersection(files):
            path = Path(root, name)
            if os.path.realpath(path) != own:
                key = path.relative_to(project).as_posix()
                out[key] = _digest(config, key)
    return out


def record(config: Config, into: Path) -> None:
    """Keep what the agent files hold now in ``into`` (the owner's part of the run directory)."""
    now = found(config)
    into.mkdir(mode=0o700, parents=True, exist_ok=True)
    for i, (rel, sha) in enumerate(sorted(now.items())):
        if not sha.startswith("<"):
            try:
                data, size = beneath.read(config.project_dir, rel, MAX_KEPT + 1)
            except (beneath.UnreachableError, OSError):
                continue
            if size <= MAX_KEPT:
                write_atomic(into / str(i), data, mode=0o600, sync_dir=False)
    write_atomic(into / MANIFEST, json.dumps(sorted(now.items())), mode=0o600)  # its directory synced: all of them


def _recorded(into: Path) -> dict[str, str] | None:
    try:
        items = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
        return {str(rel): str(digest) for rel, digest in items}
    except (OSError, ValueError, TypeError):
        return None


def changed(config: Config, into: Path) -> list[str]:
    """The agent files the run added, changed or removed (none when nothing was recorded)."""
    before = _recorded(into)
    return [] if before is None else _differ(before, found(config))


def _differ(before: dict[str, str], now: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))


def restore(config: Config, into: Path, aside: Path) -> list[str]:
    """Put the agent files back as ``record`` kept them; what the run added goes to ``aside``."""
    before = _recorded(into)
    if before is None:
        return []
    order = {rel: i for i, rel in enumerate(sorted(before))}
    top = config.project_dir
    lines = []
    for rel in _differ(before, found(config)):
        st = beneath.lstat(top, rel)
        if st is not None and (rel not in before or not stat.S_ISREG(st.st_mode)):
            _aside(top, rel, aside, rel.replace("/", "__"))
        kept = into / str(order[rel]) if rel in order else None
        if kept is not None and kept.is_file():
            parts = rel.split("/")
            for i in range(1, len(parts)):  # never write through a folder the run made a symlink
                up = beneath.lstat(top, "/".join(parts[:i]))
                if up is not None and not stat.S_ISDIR(up.st_mode):
                    _aside(top, "/".join(parts[:i]), aside, parts[i - 1])
            beneath.write(top, rel, kept.read_bytes())
        lines.append(rel)
    return (
        [f"put back {', '.join(lines)} (agent files a run never writes; what it added is in {aside})"] if lines else []
    )


def _aside(top: Path, rel: str, aside: Path, name: str) -> None:
    """Move the project's entry ``rel`` (the entry itself, resolved through no symlink) into the
    owner's folder ``aside`` as ``name``."""
    aside.mkdir(parents=True, exist_ok=True)
    up, last = beneath.split(rel)
    with beneath.folder(top, up) as d:
        dest = os.open(aside, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.rename(last, name, src_dir_fd=d, dst_dir_fd=dest)
        finally:
            os.close(dest)


def pathspecs(config: Config) -> list[str]:
    """Git pathspecs of every agent file (for the commits a run made: ``history.control_changes``)."""
    return [*(f":(glob)**/{name}" for name in sorted(NAMES)), *(f":(glob)**/{folder}/**" for folder in sorted(FOLDERS))]
