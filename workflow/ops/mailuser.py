"""Mail user: the system user Dovecot reads a root-owned project's mail as (``workflow imap`` as root).

Dovecot never reads mail as root ("Mail access not allowed for root"), so for a project whose
mail root belongs to root, ``workflow imap --write`` makes a system user of its own,
``workflow-mail`` (no home, no shell, no password), and hands it what Dovecot's mail processes
touch: the mail root (itself only, 0700: the state directory inside stays root's), each served
role's Maildir, and Dovecot's index and folders in ``/var/lib/workflow-mail/<id>``. Folders above
the mail root that it cannot enter (``/root``, ``~/.maildir``) get one POSIX ACL entry: search
(``x``) for that user alone: it can pass through, never list or read. From then on delivery, run
by root, gives each new message to the Maildir's owner (``mail.maildir``), so Dovecot reads it.
"""

from __future__ import annotations

import errno
import grp
import hashlib
import os
import pwd
import shutil
import stat
import struct
import subprocess
from pathlib import Path
from typing import NamedTuple

from workflow.core.errors import WorkflowError

NAME = "workflow-mail"
VAR = Path("/var/lib/workflow-mail")  # Dovecot's own files for root-owned projects, one folder each
ACL = "system.posix_acl_access"
ACL_VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF
SEARCH = 0o1


class MailUser(NamedTuple):
    name: str
    uid: int
    gid: int


def find(name: str = NAME) -> MailUser | None:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    return MailUser(name, pw.pw_uid, pw.pw_gid)


def ensure(name: str = NAME) -> MailUser:
    """The system user ``name``, made (with a group of its own) when there is none."""
    found = find(name)
    if found is not None:
        return found
    useradd = shutil.which("useradd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if useradd is None:
        raise WorkflowError(
            f"Dovecot needs a user of its own to read root's mail, and useradd is not here: make {name}"
        )
    argv = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
    argv += ["--shell", "/usr/sbin/nologin", name]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    made = find(name)
    if made is None:
        raise WorkflowError(f"could not make the system user {name}: {(r.stderr or r.stdout).strip()}")
    return made


def folder(directory: Path) -> Path:
    """Dovecot's mail-side folder for the configuration in ``directory``: one per configuration."""
    return VAR / hashlib.sha256(os.fsencode(directory.resolve())).hexdigest()[:12]


def hand_over(path: Path, user: MailUser, whole: bool = True) -> None:
    """Give ``path`` (and, ``whole``, everything under it, never through a symlink) to ``user``."""
    os.lchown(path, user.uid, user.gid)
    if not whole:
        return
    for top, dirs, files in os.walk(path):
        for n in dirs + files:
            os.lchown(os.path.join(top, n), user.uid, user.gid)


def can_search(path: Path, st: os.stat_result, user: MailUser) -> bool:
    """Whether ``user`` may pass through the folder ``path``: by its mode, or by an ACL entry of its own."""
    if st.st_uid == user.uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == user.gid and st.st_mode & 0o010:
        return True
    if st.st_mode & 0o001:
        return True
    try:
        entries = _parse(os.getxattr(path, ACL))
    except OSError:
        return False
    return bool(entries.get((USER, user.uid), 0) & entries.get((MASK, NO_ID), SEARCH) & SEARCH)


def let_pass(path: Path, user: MailUser) -> list[Path]:
    """Let ``user`` search every folder from / down to ``path`` that it could not: one ACL entry
    (``user:NAME:--x``) each. Returns the folders given one."""
    given = []
    for p in [*reversed(path.resolve().parents), path.resolve()]:
        st = os.stat(p)
        if can_search(p, st, user):
            continue
        _add_search(p, st, user.uid)
        given.append(p)
    return given


def _add_search(path: Path, st: os.stat_result, uid: int) -> None:
    try:
        entries = _parse(os.getxattr(path, ACL))
    except OSError as e:
        if e.errno not in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
            raise WorkflowError(f"{path}: cannot read its ACL: {e.strerror}") from None
        mode = stat.S_IMODE(st.st_mode)
        entries = {(USER_OBJ, NO_ID): mode >> 6 & 7, (GROUP_OBJ, NO_ID): mode >> 3 & 7, (OTHER, NO_ID): mode & 7}
    entries[(USER, uid)] = entries.get((USER, uid), 0) | SEARCH
    group_class = [perm for (tag, _), perm in entries.items() if tag in (USER, GROUP, GROUP_OBJ)]
    had_mask = (MASK, NO_ID) in entries
    entries[(MASK, NO_ID)] = entries[(MASK, NO_ID)] | SEARCH if had_mask else _union(group_class)
    try:
        os.setxattr(path, ACL, _pack(entries))
    except OSError as e:
        raise WorkflowError(
            f"{path}: cannot let {NAME} pass through (an ACL entry): {e.strerror}; "
            f"grant it by hand: setfacl -m u:{NAME}:x {path}"
        ) from None


def _union(perms: list[int]) -> int:
    out = 0
    for p in perms:
        out |= p
    return out


def _parse(blob: bytes) -> dict[tuple[int, int], int]:
    (version,) = struct.unpack_from("<I", blob)
    if version != ACL_VERSION:
        raise WorkflowError(f"an ACL of version {version}, not {ACL_VERSION}")
    out = {}
    for off in range(4, len(blob), 8):
        tag, perm, ident = struct.unpack_from("<HHI", blob, off)
        out[(tag, ident)] = perm
    return out


def _pack(entries: dict[tuple[int, int], int]) -> bytes:
    body = b"".join(struct.pack("<HHI", tag, perm, ident) for (tag, ident), perm in sorted(entries.items()))
    return struct.pack("<I", ACL_VERSION) + body


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        raise WorkflowError(f"the group {gid} has no name here") from None
