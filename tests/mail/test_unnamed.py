"""Unnamed copies: written with no name in new/, invisible until linked, never replacing a name,
gone without a trace when never linked, and not used where the system cannot link them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workflow.mail.maildir import Maildirs
from workflow.mail.unnamed import Unnamed

RAW = b"From: a@workflow.local\r\nSubject: x\r\n\r\nbody\r\n"


def maildir(tmp_path: Path) -> str:
    return Maildirs(tmp_path / "mail").ensure("box")


def test_a_copy_is_invisible_until_linked_then_holds_every_byte(tmp_path: Path) -> None:
    box = maildir(tmp_path)
    unnamed = Unnamed()
    fd = unnamed.write(box, RAW)
    assert fd is not None, "this machine kind has O_TMPFILE and /proc/self/fd"
    try:
        assert os.listdir(f"{box}/new") == [] and os.listdir(f"{box}/tmp") == []  # the first write's try left nothing
        os.fsync(fd)
        target = unnamed.link(fd, box, "1.M1P1R1.host")
    finally:
        os.close(fd)
    assert target == f"{box}/new/1.M1P1R1.host"
    assert Path(target).read_bytes() == RAW
    assert os.stat(target).st_nlink == 1 and os.stat(target).st_mode & 0o777 == 0o600


def test_a_link_never_replaces_a_name(tmp_path: Path) -> None:
    box = maildir(tmp_path)
    Path(box, "new", "taken").write_bytes(b"already here")
    unnamed = Unnamed()
    fd = unnamed.write(box, RAW)
    assert fd is not None
    try:
        target = unnamed.link(fd, box, "taken")
    finally:
        os.close(fd)
    assert Path(box, "new", "taken").read_bytes() == b"already here"
    assert target.startswith(f"{box}/new/taken.") and Path(target).read_bytes() == RAW


def test_a_copy_never_linked_leaves_nothing(tmp_path: Path) -> None:
    box = maildir(tmp_path)
    unnamed = Unnamed()
    fds = [unnamed.write(box, RAW * 100) for _ in range(20)]
    for fd in fds:
        assert fd is not None
        assert os.fstat(fd).st_nlink == 0 and os.fstat(fd).st_size == len(RAW) * 100
        os.close(fd)
    assert os.listdir(f"{box}/new") == [] and os.listdir(f"{box}/tmp") == []


def test_a_link_into_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    box = maildir(tmp_path)
    unnamed = Unnamed()
    fd = unnamed.write(box, RAW)
    assert fd is not None
    try:
        os.rmdir(f"{box}/new")
        with pytest.raises(FileNotFoundError) as e:
            unnamed.link(fd, box, "x")
    finally:
        os.close(fd)
    assert e.value.filename == f"{box}/new/x"


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap not installed (scripts/system-packages installs it)"
)
def test_without_proc_self_fd_copies_go_through_tmp(tmp_path: Path) -> None:
    """In a sandbox whose /proc is empty, a descriptor cannot be linked: the writer says so, and
    the server's committer writes into tmp/ instead."""
    box = maildir(tmp_path)
    script = (
        "import sys; from workflow.mail.unnamed import Unnamed; u = Unnamed();"
        f"print(u.available, u.write({box!r}, b'x'))"
    )
    out = subprocess.run(
        ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--tmpfs", "/proc", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.stdout.split() == ["False", "None"]
    assert os.listdir(f"{box}/new") == [] and os.listdir(f"{box}/tmp") == []
