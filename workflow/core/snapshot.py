"""Snapshot: what a short command knows of a project without loading its configuration.

Loading a project (TOML, sections, roles, the roster) costs a short command more than its whole
start-up budget (docs/performance.md). After a full command has loaded a project and checked
that the mail root is its own, it saves a snapshot — the few facts the reading commands need,
and the identity (device, inode, size, mtime, ctime, a CRC of the content) of every file and folder those facts came from.
A short command finds its project's config as the full one would (``find_config``), loads the
snapshot and uses it only if every one of those files is unchanged and the environment that
chose the mail root is the same; otherwise it runs as the full command, which saves a new one.

Snapshots live in the user's cache (``$XDG_CACHE_HOME/workflow-mail``, else ``~/.cache``): not in
the project, which a sandboxed agent may write, and not in the mail root, which is found only
by loading the config. The format is ``marshal`` of plain values (no code); anything unexpected
in the file means no snapshot. Start-up time: this module imports nothing heavy.
"""

from __future__ import annotations

import marshal
import os
import stat
import zlib

FORMAT = 4
CONFIG_NAME = "workflow.toml"
# What else chooses the mail root (config.load_config) and the owner's credential file
ENV = ("WORKFLOW_MAIL_ROOT", "HOME", "WORKFLOW_CREDENTIALS", "XDG_CONFIG_HOME")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

Stamp = tuple[str, int, int, int, int, int, int]  # path, device, inode, size, mtime, ctime, CRC (-1: absent)
MAX_HASHED = 1 << 20  # a file larger than this is stamped without its content's CRC


def find_config(start: str) -> str | None:
    """The nearest workflow.toml at or above ``start`` (an absolute, resolved directory)."""
    d = start
    while True:
        candidate = os.path.join(d, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def outer_config(found: str) -> str | None:
    """The workflow.toml of a project that holds the config ``found`` (one further up, up to the
    top of the git repository ``found`` is in), or None. A config inside a project is never used
    by finding it: it may be an agent's, written in an artifact folder, waiting for the owner to
    run a command below it."""
    d = os.path.dirname(found)
    while not os.path.lexists(os.path.join(d, ".git")):
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up
        candidate = os.path.join(d, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
    return None


def config_path(given: str | None, env: Mapping[str, str]) -> str | None:
    """The config a command uses: ``given`` (``--config``), else ``$WORKFLOW_CONFIG``, else the
    nearest workflow.toml above the current directory — resolved, as ``load_config`` does."""
    given = given or env.get("WORKFLOW_CONFIG") or None
    if given is not None:
        return os.path.realpath(os.path.expanduser(given))
    found = find_config(os.path.realpath(os.getcwd()))
    return None if found is None or outer_config(found) is not None else found


def stamp(path: str) -> Stamp:
    """A file's or folder's identity: device, inode, size, mtime, ctime — nobody can set a
    ctime back, so a file rewritten byte for byte with its mtime reset still differs — and, for
    a small regular file, a CRC of its content."""
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1, -1, -1, -1, -1)
    crc = -1
    if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_HASHED:
        try:
            with open(path, "rb") as f:
                crc = zlib.crc32(f.read(MAX_HASHED + 1))
        except OSError:
            crc = -2
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, crc)


def stamps(paths: Iterable[str]) -> list[Stamp]:
    """Stamps of these files and folders (a folder's changes when an entry is added or removed)."""
    return [stamp(p) for p in paths]


def cache_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "workflow-mail")


def location(config: str, env: Mapping[str, str]) -> str:
    """Where the snapshot of the project configured by ``config`` lives."""
    name = os.path.basename(os.path.dirname(config)) or "root"
    return os.path.join(cache_dir(env), f"{name}-{zlib.crc32(config.encode('utf-8', 'surrogateescape')):08x}")


def _key(config: str, env: Mapping[str, str]) -> list[object]:
    return [FORMAT, config, *(env.get(k) for k in ENV)]


def load(config: str, env: Mapping[str, str]) -> dict[str, object] | None:
    """The snapshot of this project if it is current, else None."""
    try:
        with open(location(config, env), "rb") as f:
            found = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(found, dict) or found.get("key") != _key(config, env):
        return None
    recorded = found.get("stamps")
    if not isinstance(recorded, list) or not all(isinstance(s, tuple) and len(s) == 7 for s in recorded):
        return None
    if any(stamp(str(s[0])) != s for s in recorded):
        return None
    facts = found.get("facts")
    return facts if isinstance(facts, dict) else None


RACY_NS = 100_000_000  # a source changed this close before the load may have changed during it


def save(
    config: str, env: Mapping[str, str], sources: Iterable[str], facts: Mapping[str, object], loaded_at_ns: int
) -> bool:
    """Save ``facts`` — read from ``sources`` by a load that began at ``loaded_at_ns`` — as the
    snapshot of this project, valid while those sources are unchanged. Not when a source changed
    around the load (its stamp may not match what was read), and best effort: a cache that
    cannot be written only means the next short command loads fully. Returns whether it saved."""
    target = location(config, env)
    taken = stamps(sources)
    if any(max(s[4], s[5]) >= loaded_at_ns - RACY_NS for s in taken):
        return False
    data = marshal.dumps({"key": _key(config, env), "stamps": taken, "facts": dict(facts)})
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


class Known:
    """A project as its snapshot knows it (the names ``core.locate`` reads, and the views)."""

    def __init__(self, facts: Mapping[str, object]) -> None:
        self.mail_root = str(facts["mail_root"])
        self.index_path = str(facts["index_path"])
        self.domain = str(facts["domain"])
        self.project_dir = str(facts["project_dir"])
        self.states = tuple(str(s) for s in facts["states"])  # type: ignore[attr-defined]
        self.event_types = tuple(str(s) for s in facts["event_types"])  # type: ignore[attr-defined]
        self.artifact_roots = tuple(str(s) for s in facts["artifact_roots"])  # type: ignore[attr-defined]
        self.views: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = facts["views"]  # type: ignore[assignment]
        self.default_sender = str(facts["default_sender"])
        smtp: tuple[object, object] = facts["smtp"]  # type: ignore[assignment]
        self.smtp = (str(smtp[0]), float(smtp[1]))  # type: ignore[arg-type]  # the server's socket, timeout
        self.login = str(facts["login"])
        self.owner_file = str(facts["owner_file"])
