"""Snapshot: what a short command knows of a project without loading its configuration.

Loading a project (TOML, sections, roles, the roster) costs a short command more than its whole
start-up budget (docs/performance.md). After a full command has loaded a project and checked
that the mail root is its own, it saves a snapshot — the few facts the reading commands need,
and the identity (device, inode, size, mtime, ctime, a CRC of the content) of every file and folder those facts came from.
A short command finds its project's config as the full one would (``core.configfile``), loads the
snapshot and uses it only if every one of those files is unchanged and the environment that
chose the mail root is the same; otherwise it runs as the full command, which saves a new one.

Snapshots live in the user's cache (``$XDG_CACHE_HOME/workflow-mail``, else ``~/.cache``): not in
the project, which a sandboxed agent may write, and not in the mail root, which is found only
by loading the config. The facts are one typed record, ``Facts``, written by ``save`` and read by
``load`` only; on disk it is ``marshal`` of plain values (no code), and anything unexpected in the
file — a field missing or of another type — means no snapshot. Start-up time: this module imports nothing heavy.
"""

from __future__ import annotations

import marshal
import os
import stat
import zlib

FORMAT = 5  # the layout of ``Facts``: bump it whenever a field is added, removed or moved
# What else chooses the mail root (config.load_config) and the owner's credential file
ENV = ("WORKFLOW_MAIL_ROOT", "HOME", "WORKFLOW_CREDENTIALS", "XDG_CONFIG_HOME")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

Stamp = tuple[str, int, int, int, int, int, int]  # path, device, inode, size, mtime, ctime, CRC (-1: absent)
MAX_HASHED = 1 << 20  # a file larger than this is stamped without its content's CRC


class Facts(NamedTuple):
    """What a short command knows of a project: the names ``core.locate`` and ``cli.reading``
    read, what each identity may see, and where its server listens."""

    mail_root: str
    index_path: str
    domain: str
    project_dir: str
    states: tuple[str, ...]
    event_types: tuple[str, ...]
    artifact_roots: tuple[str, ...]
    views: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # identity: (mailboxes, senders) it may see
    default_sender: str
    socket: str  # the server's Unix socket, where the owner logs in
    timeout: float  # [smtp] timeout
    login: str  # the owner's login to that server (bound to the mail root)


TYPES: tuple[type, ...] = (str, str, str, str, tuple, tuple, tuple, dict, str, str, float, str)  # Facts' fields


def _facts(found: object) -> Facts | None:
    """``found`` as Facts if it is one field for field (what ``save`` wrote), else None."""
    if not isinstance(found, tuple) or len(found) != len(TYPES):
        return None
    if not all(type(v) is t for v, t in zip(found, TYPES, strict=True)):
        return None
    facts = Facts(*found)
    strings = (*facts.states, *facts.event_types, *facts.artifact_roots)
    if not all(type(v) is str for v in strings):
        return None
    for name, view in facts.views.items():
        if type(name) is not str or type(view) is not tuple or len(view) != 2:
            return None
    return facts


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


def load(config: str, env: Mapping[str, str]) -> Facts | None:
    """The snapshot of this project if it is current, else None."""
    try:
        with open(location(config, env), "rb") as f:
            found = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(found, tuple) or len(found) != 3 or found[0] != _key(config, env):
        return None
    recorded = found[1]
    if not isinstance(recorded, list) or not all(isinstance(s, tuple) and len(s) == 7 for s in recorded):
        return None
    if any(stamp(str(s[0])) != s for s in recorded):
        return None
    return _facts(found[2])


RACY_NS = 100_000_000  # a source changed this close before the load may have changed during it


def save(config: str, env: Mapping[str, str], sources: Iterable[str], facts: Facts, loaded_at_ns: int) -> bool:
    """Save ``facts`` — read from ``sources`` by a load that began at ``loaded_at_ns`` — as the
    snapshot of this project, valid while those sources are unchanged. Not when a source changed
    around the load (its stamp may not match what was read), and best effort: a cache that
    cannot be written only means the next short command loads fully. Returns whether it saved."""
    target = location(config, env)
    taken = stamps(sources)
    if any(max(s[4], s[5]) >= loaded_at_ns - RACY_NS for s in taken):
        return False
    data = marshal.dumps((_key(config, env), taken, tuple(facts)))
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
