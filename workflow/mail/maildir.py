"""Maildir: durable delivery (tmp → fsync → rename into new/ → fsync new/), reading, flags.

Bytes are stored exactly as received; nothing is re-serialised. A multi-mailbox delivery is
all-or-nothing: either every copy is in its new/ and every directory is fsynced, or no copy is
left in any new/. Reading never changes a flag; only ``set_flags`` (and ``mark_seen``, the one
way every reader marks mail read) does.
"""

from __future__ import annotations

import errno
import os
import time

from workflow.core import runmark
from workflow.core.errors import DeliveryError
from workflow.core.files import fsync_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

SUBDIRS = ("tmp", "new", "cur")


class Entry(NamedTuple):
    """One stored copy: its mailbox, its unique key, where it is (new|cur) and its flags."""

    mailbox: str
    key: str
    subdir: str
    flags: str
    file: str  # the full path as a string (cheap to make while scanning thousands)

    @property
    def path(self) -> Path:
        from pathlib import Path  # lazy: start-up time; the short commands' path works with str

        return Path(self.file)

    @property
    def seen(self) -> bool:
        return "S" in self.flags


def _hostname() -> str:
    import socket  # lazy: start-up time (~5 ms); only writers name files, and readers start often

    return socket.gethostname().replace("/", "\\057").replace(":", "\\072") or "localhost"


def split_name(name: str) -> tuple[str, str]:
    """A file name in cur/ or new/ as (key, flags)."""
    key, sep, info = name.partition(":")
    if sep and info.startswith("2,"):
        return key, info[2:]
    return key, ""


SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writing the range's dirty pages; do not wait


class Writeback:
    """Start writing a new file's data to disk without waiting for it (Linux ``sync_file_range``),
    ahead of a batch of fsyncs.

    A file's blocks are allocated when its data is first written out. Fsynced one by one, each file
    of a batch writes its data, and on a journaled file system commits the journal for its own
    allocation, one after another. Started together first, every allocation joins the running
    transaction: the first fsync commits them all, and the rest only wait for their data. Without
    a journal (ext4 can run without one), an fsync writes the file's data, its inode and a new
    file's directory synchronously, and the data started first is already on its way. Where the
    call is missing (another libc or system), ``start`` does nothing; the fsyncs that follow are
    what make the data durable either way, and they report any error."""

    def __init__(self) -> None:
        import ctypes  # lazy: start-up time; only the server's committer starts write-outs

        try:
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
        except (OSError, AttributeError):
            self._fn: Callable[..., int] | None = None
            return
        fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
        fn.restype = ctypes.c_int
        self._fn = fn

    @property
    def available(self) -> bool:
        return self._fn is not None

    def start(self, fd: int) -> None:
        if self._fn is not None:
            self._fn(fd, 0, 0, SYNC_FILE_RANGE_WRITE)  # a failure here is the fsync's to report


class DirFsync:
    """fsync directories through fds kept open (one stat instead of open+close per sync). Each
    fd remembers the (device, inode) it was opened on, so a directory replaced meanwhile is
    reopened rather than a stale one synced. Used by one thread at a time."""

    def __init__(self) -> None:
        self._fds: dict[str, tuple[int, int, int]] = {}
        self.syncs = 0

    def fsync(self, d: str) -> None:
        os.fsync(self.fd(d))
        self.syncs += 1

    def fd(self, d: str) -> int:
        """An fd of directory ``d`` as it is now, kept open for the next sync (the caller syncs it)."""
        cached = self._fds.get(d)
        if cached is not None:
            fd, dev, ino = cached
            st = os.stat(d)
            if (st.st_dev, st.st_ino) == (dev, ino):
                return fd
            self._fds.pop(d, None)
            os.close(fd)
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if len(self._fds) >= 256:
            os.close(self._fds.pop(next(iter(self._fds)))[0])
        self._fds[d] = (fd, st.st_dev, st.st_ino)
        return fd

    def close(self) -> None:
        for fd, _, _ in self._fds.values():
            os.close(fd)
        self._fds.clear()


def give_to_owner(fd: int, box: str) -> None:
    """A copy root writes into a Maildir another user owns (the user Dovecot reads root's mail as,
    ``ops.mailuser``) is made that user's, so its IMAP reader can read it."""
    if os.geteuid() != 0:
        return
    st = os.stat(box)
    if st.st_uid != 0:
        os.fchown(fd, st.st_uid, st.st_gid)


class Maildirs:
    """The mail root: one Maildir per mailbox, created on first delivery."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._host = ""  # looked up on the first write: readers never need it
        self._ready: set[str] = set()  # mailboxes whose tmp/new/cur were seen; skips three stats
        self._dirs: dict[str, str] = {}  # mailbox → its directory, as a string (the hot paths')

    def path(self, mailbox: str) -> Path:
        if not mailbox or "/" in mailbox or mailbox.startswith(".") or "\0" in mailbox:
            raise DeliveryError(f"invalid mailbox name {mailbox!r}")
        return self.root / mailbox

    def dir(self, mailbox: str) -> str:
        """``path`` as a string, looked up once per mailbox (building a Path costs more than a
        delivery's rename)."""
        d = self._dirs.get(mailbox)
        if d is None:
            d = self._dirs[mailbox] = str(self.path(mailbox))
        return d

    def mailboxes(self) -> list[str]:
        return mailboxes_in(str(self.root))

    def ensure(self, mailbox: str) -> str:
        """Create mailbox/{tmp,new,cur} (and parents), fsyncing each directory that was created;
        returns the mailbox's directory."""
        if mailbox in self._ready:
            return self.dir(mailbox)
        box = self.path(mailbox)
        if all((box / s).is_dir() for s in SUBDIRS):
            self._ready.add(mailbox)
            return self.dir(mailbox)
        created: list[Path] = []
        missing: list[Path] = []
        p = box
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            self._mkdir(d)
            created.append(d)
        for s in SUBDIRS:
            d = box / s
            if not d.is_dir():
                self._mkdir(d)
                created.append(d)
        for d in {c.parent for c in created}:
            fsync_dir(d)
        self._ready.add(mailbox)
        return self.dir(mailbox)

    @staticmethod
    def _mkdir(d: Path) -> None:
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise DeliveryError(f"cannot create mail directory {d}: {e.strerror}") from None

    def new_name(self) -> str:
        """A unique file name (time, microseconds, pid, 64 random bits, host), as Maildir asks."""
        if not self._host:
            self._host = _hostname()
        now = time.time()
        sec = int(now)
        usec = int((now - sec) * 1_000_000)
        return f"{sec}.M{usec:06d}P{os.getpid()}R{os.urandom(8).hex()}.{self._host}"

    def write_tmp(self, box: str, data: bytes) -> tuple[str, str]:
        """Create tmp/<unique> exclusively, write every byte (checking each write), fsync it."""
        tmp, name, fd = self.stage(box, data)
        try:
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink_quiet(tmp)
            raise
        os.close(fd)
        return tmp, name

    def stage(self, box: str, data: bytes) -> tuple[str, str, int]:
        """Create tmp/<unique> exclusively and write every byte; the fd stays open, unsynced.

        The server's committer stages a whole batch before fsyncing any file, and starts writing
        them all first (``Writeback``), so the fsyncs after the first find little left to do.
        """
        for _ in range(8):
            name = self.new_name()
            tmp = f"{box}/tmp/{name}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            try:
                give_to_owner(fd, box)
                write_all(fd, data)
            except BaseException:
                os.close(fd)
                _unlink_quiet(tmp)
                raise
            return tmp, name, fd
        raise DeliveryError(f"could not find a unique file name in {box}/tmp")

    def deliver(self, mailboxes: Sequence[str], data: bytes) -> list[Entry]:
        """Store one copy in each mailbox durably; all or nothing. Returns the stored entries.

        tmp/ (O_EXCL, fsync) → rename into new/ → fsync new/. The name is unique in tmp/ by
        O_EXCL and carries 64 random bits, and rename is checked against an existing target
        first, so no message is ever replaced. Inside a run's sandbox it refuses (``core.runmark``):
        the mail root there is the sandbox's own view, and a copy written there reaches nobody.
        """
        sandboxed = runmark.no_direct_delivery()
        if sandboxed:
            raise DeliveryError(sandboxed)
        tmps: list[tuple[str, str, str]] = []
        moved: list[str] = []
        try:
            for mb in mailboxes:
                box = self.ensure(mb)
                tmp, name = self.write_tmp(box, data)
                tmps.append((mb, tmp, name))
            entries: list[Entry] = []
            for mb, tmp, name in tmps:
                target = self.move_new(tmp, name)
                moved.append(target)
                entries.append(Entry(mb, os.path.basename(target), "new", "", target))
            for dname in {os.path.dirname(t) for t in moved}:
                fsync_dir(dname)
        except BaseException as e:
            self.undo(mailboxes, moved, [tmp for _, tmp, _ in tmps])
            raise self.failure(e) from None
        return entries

    def undo(self, mailboxes: Sequence[str], moved: Sequence[str], tmps: Sequence[str]) -> None:
        """Take back a failed delivery: no copy stays in any new/, no file in tmp/."""
        self._ready.difference_update(mailboxes)  # look again next time (it may have been removed)
        for target in moved:
            _unlink_quiet(target)
        for d in {os.path.dirname(t) for t in moved}:
            try:
                fsync_dir(d)
            except OSError:
                pass
        for tmp in tmps:
            _unlink_quiet(tmp)

    def failure(self, e: BaseException) -> BaseException:
        """The error a failed write is reported as (OSError → DeliveryError naming the path)."""
        if isinstance(e, OSError):
            where = e.filename or self.root
            return DeliveryError(f"cannot store message in {where}: {e.strerror or e}")
        return e

    @staticmethod
    def move_new(tmp: str, name: str) -> str:
        """Rename tmp/<name> into new/ (never over an existing file); returns the new path."""
        new = os.path.dirname(os.path.dirname(tmp)) + "/new/"
        target = new + name
        for _ in range(8):
            if not os.path.lexists(target):
                os.rename(tmp, target)
                return target
            target = f"{new}{name}.{os.urandom(4).hex()}"
        raise DeliveryError(f"could not find a unique file name in {new}")

    def scan(self, mailbox: str) -> Iterator[Entry]:
        """Every stored copy in a mailbox (new/ and cur/), without reading or marking anything."""
        box = self.path(mailbox)
        for sub in ("new", "cur"):
            d = box / sub
            try:
                it = os.scandir(d)
            except FileNotFoundError:
                continue
            with it:
                for de in it:
                    if de.name.startswith("."):
                        continue
                    key, flags = split_name(de.name)
                    yield Entry(mailbox, key, sub, flags, de.path)

    def find(self, mailbox: str, key: str) -> Entry | None:
        return find_in(self.dir(mailbox), mailbox, key)

    def set_flags(self, entry: Entry, flags: str) -> Entry:
        """Move a copy into cur/ with exactly ``flags`` (sorted, as Maildir requires)."""
        flags = "".join(sorted(set(flags)))
        target = self.path(entry.mailbox) / "cur" / f"{entry.key}:2,{flags}"
        if str(target) == entry.file:
            return entry
        os.rename(entry.file, target)
        fsync_dir(target.parent)
        if entry.subdir == "new":
            fsync_dir(entry.path.parent)
        return Entry(entry.mailbox, entry.key, "cur", flags, str(target))

    def mark_seen(self, mailbox: str, key: str) -> bool:
        """Flag one stored copy seen wherever it is now; False when it is gone or already seen."""
        entry = self.find(mailbox, key)
        if entry is None or entry.seen:
            return False
        self.set_flags(entry, entry.flags + "S")
        return True


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``, checking each write."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def mailboxes_in(root: str) -> list[str]:
    """The mailboxes under a mail root: its folders that hold a new/ (not the dot folders)."""
    try:
        found = os.scandir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    with found:
        return sorted(
            d.name
            for d in found
            if d.is_dir() and not d.name.startswith(".") and os.path.isdir(os.path.join(d.path, "new"))
        )


def find_in(box_dir: str, mailbox: str, key: str) -> Entry | None:
    """Where the copy ``key`` of ``mailbox`` (whose Maildir is ``box_dir``) is now, or None."""
    p = os.path.join(box_dir, "new", key)
    if os.path.exists(p):
        return Entry(mailbox, key, "new", "", p)
    try:
        with os.scandir(os.path.join(box_dir, "cur")) as it:
            for de in it:
                k, flags = split_name(de.name)
                if k == key:
                    return Entry(mailbox, key, "cur", flags, de.path)
    except FileNotFoundError:
        pass
    return None


def read_at(box_dir: str, mailbox: str, key: str, subdir: str, flags: str) -> bytes | None:
    """The bytes of the copy ``key`` of ``mailbox``: at the place an index recorded (``subdir``,
    ``flags``), else wherever it has gone since (a scan of its cur/); None when it is gone."""
    recorded = os.path.join(box_dir, subdir, key if subdir == "new" else f"{key}:2,{flags}")
    try:
        with open(recorded, "rb") as f:
            return f.read()
    except FileNotFoundError:
        pass
    entry = find_in(box_dir, mailbox, key)
    if entry is None:
        return None
    try:
        with open(entry.file, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _unlink_quiet(p: Path | str) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass
