"""Current: the config and roster a running server checks and composes with, reloaded when their files change.

A server loads workflow.toml and the roles once, at start; people edit them while it runs. Before
each mail transaction and each XNOTIFY the server asks ``Current.refresh``: if workflow.toml, a
roles folder or a role file changed since the last load, it loads the project again and takes
the new config and roster — so the next notification, composed here or by the full command,
meets the roster the files hold now. What a listening server cannot change (its ``[smtp]``
section: address, logins, TLS, limits; its mail root) is kept until a restart, and logged.
A reload that fails (a half-written TOML, a broken role: every role file is parsed) keeps the last good config and roster
and sets ``problem``: XNOTIFY is then refused, so workflow-notify runs in full and says what
is wrong, and the next change is tried again.

Noticing a change costs one ``read`` of an inotify descriptor (Linux): no event, no work; the
events are read before the load, so a change during a load is seen at the next check. Where
inotify is missing, every check compares the files' stat stamps instead. Each worker of
``workflow smtpd --workers N`` watches and reloads on its own.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

from workflow.core.config import Config, load_config
from workflow.core.errors import WorkflowError
from workflow.policy.roles import role_sources
from workflow.policy.roster import Roster

log = logging.getLogger("workflow.delivery.server.smtpd")  # the server's log

# inotify(7)
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, 0o2000000
CHANGES = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800  # modify … move-self
OVERFLOW = 0x4000  # events were dropped: anything may have changed
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (a NUL-padded name follows)


def sources(config: Config) -> list[Path]:
    """The files and folders a server's config and roster come from."""
    return [*([config.path] if config.path is not None else []), *role_sources(config)]


def _stamp(path: Path) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Stamps:
    """Changes seen by comparing stat stamps (where inotify is missing)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths: list[Path] = []
        self.seen: list[tuple[int, ...]] = []
        self.follow(paths)

    def follow(self, paths: list[Path]) -> None:
        if paths != self.paths:
            self.paths, self.seen = paths, [_stamp(p) for p in paths]

    def changed(self) -> bool:
        now = [_stamp(p) for p in self.paths]
        changed, self.seen = now != self.seen, now
        return changed

    def close(self) -> None:
        return None


class Inotify:
    """Changes seen as inotify events: every entry of a folder among the paths, a file by its
    name in its folder (an editor may replace it), a missing folder by its name in its parent."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self.libc, self.fd = libc, fd
        self.names: dict[int, set[str] | None] = {}  # watch: the names that matter in it (None: any)
        self.fresh = False  # a folder watched just now: what was written in it before is unseen

    @classmethod
    def make(cls, paths: list[Path]) -> Inotify | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        watch = cls(libc, fd)
        watch.follow(paths)
        return watch

    def _add(self, folder: Path, name: str | None) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(folder), CHANGES)  # the same wd for a folder watched
        if wd < 0:
            return  # absent: its parent's watch sees it appear
        if wd not in self.names and self.names:
            self.fresh = True  # made since the first watches: look again at the next check
        names = self.names.setdefault(wd, set())
        if name is None:
            self.names[wd] = None
        elif names is not None:
            names.add(name)

    def follow(self, paths: list[Path]) -> None:
        """Watch these too (on the same descriptor: no event is lost between two loads)."""
        for p in paths:
            if p.is_dir():
                self._add(p, None)
            self._add(p.parent, p.name)

    def changed(self) -> bool:
        """Whether an event names one of the paths (every pending event is read)."""
        hit, self.fresh = self.fresh, False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return hit
            except InterruptedError:
                continue
            at = 0
            while at + EVENT.size <= len(data):
                wd, mask, _, n = EVENT.unpack_from(data, at)
                name = data[at + EVENT.size : at + EVENT.size + n].rstrip(b"\0").decode("utf-8", "surrogateescape")
                at += EVENT.size + n
                names = self.names.get(wd, set())
                if mask & OVERFLOW or names is None or name in names:
                    hit = True

    def close(self) -> None:
        os.close(self.fd)


class Current:
    """The config and roster a server uses now; ``adopt`` is called with each new pair."""

    def __init__(self, config: Config, roster: Roster, adopt: Callable[[Config, Roster], None]) -> None:
        self.config, self.roster, self.adopt = config, roster, adopt
        self.problem: str | None = None  # why the files could not be loaded, while they cannot
        self.watch: Inotify | Stamps = self._watch()

    def _watch(self) -> Inotify | Stamps:
        paths = sources(self.config)
        return Inotify.make(paths) or Stamps(paths)

    def refresh(self) -> None:
        """Load the project again if its files changed since the last look."""
        if not self.watch.changed():
            return
        config = self.config
        self.watch.follow(sources(config))  # a roles folder made since: watched before it is read
        try:
            new = load_config(config.path, cwd=config.project_dir, mail_root=config.mail_root, plugins=config.plugins)
            roster = Roster.load(new)
            list(roster.roles.values())  # every role file parsed now: a broken one keeps the last good roster
        except (WorkflowError, OSError) as e:
            self.problem = str(e).replace("\r", " ").replace("\n", " ")  # it goes into an SMTP reply
            log.warning("%s changed but cannot be loaded; serving with the last good config: %s", config.path, e)
            return
        if new.smtp != config.smtp:
            log.warning("[smtp] changed in %s: it takes effect when the server is restarted", config.path)
            new = new._replace(smtp=config.smtp)
        self.config, self.roster, self.problem = new, roster, None
        self.watch.follow(sources(new))  # a roles folder made or moved
        self.adopt(new, roster)
        log.info("reloaded %s: %d roles", config.path or "the config", len(roster.roles))

    def close(self) -> None:
        self.watch.close()
