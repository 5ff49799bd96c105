"""Maildir: durable, byte-exact, all-or-nothing delivery readable by stdlib, notmuch and mblaze."""

from __future__ import annotations

import mailbox
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from workflow.core.errors import DeliveryError
from workflow.mail.maildir import Maildirs, Writeback

RAW = b"From: a@workflow.local\r\nTo: b@workflow.local\r\nSubject: hi\r\nMessage-ID: <m1@workflow.local>\r\n\r\nbody line\r\n"


def test_delivery_is_byte_exact_private_and_in_new(tmp_path: Path) -> None:
    md = Maildirs(tmp_path / "mail")
    [e] = md.deliver(["spec-reviewer"], RAW)
    assert e.path.parent == tmp_path / "mail" / "spec-reviewer" / "new"
    assert e.path.read_bytes() == RAW  # CRLF kept, nothing re-serialised
    assert stat.S_IMODE(e.path.stat().st_mode) == 0o600
    assert list((tmp_path / "mail" / "spec-reviewer" / "tmp").iterdir()) == []


def test_one_copy_per_mailbox_with_unique_names(tmp_path: Path) -> None:
    md = Maildirs(tmp_path)
    entries = md.deliver(["a", "b", "c"], RAW)
    assert sorted(e.mailbox for e in entries) == ["a", "b", "c"]
    names = {md.deliver(["a"], RAW)[0].key for _ in range(200)}
    assert len(names) == 200


def test_stdlib_mailbox_reads_it(tmp_path: Path) -> None:
    md = Maildirs(tmp_path)
    md.deliver(["box"], RAW)
    mb = mailbox.Maildir(tmp_path / "box", create=False)
    [msg] = list(mb)
    assert msg["Message-ID"] == "<m1@workflow.local>"
    assert msg.get_subdir() == "new"


def test_all_or_nothing_when_one_mailbox_fails(tmp_path: Path) -> None:
    md = Maildirs(tmp_path)
    md.ensure("good")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "new").write_text("not a directory")
    with pytest.raises(DeliveryError, match="cannot store message"):
        md.deliver(["good", "broken"], RAW)
    assert list((tmp_path / "good" / "new").iterdir()) == []
    assert list((tmp_path / "good" / "tmp").iterdir()) == []


def test_unwritable_mail_root_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    md = Maildirs(blocker / "mail")
    with pytest.raises(DeliveryError, match="cannot create mail directory"):
        md.deliver(["box"], RAW)


@pytest.mark.parametrize("name", ["", "../x", ".hidden", "a/b"])
def test_bad_mailbox_names_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(DeliveryError, match="invalid mailbox name"):
        Maildirs(tmp_path).deliver([name], RAW)


def test_scanning_marks_nothing_and_set_flags_moves_to_cur(tmp_path: Path) -> None:
    md = Maildirs(tmp_path)
    [e] = md.deliver(["box"], RAW)
    before = sorted(p.name for p in (tmp_path / "box").rglob("*"))
    assert [x.key for x in md.scan("box")] == [e.key]
    assert md.find("box", e.key) == e
    assert sorted(p.name for p in (tmp_path / "box").rglob("*")) == before
    seen = md.set_flags(e, "S")
    assert seen.path == tmp_path / "box" / "cur" / f"{e.key}:2,S" and seen.seen
    assert md.find("box", e.key) == seen
    assert md.set_flags(seen, "SF").flags == "FS"


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (scripts/system-packages installs it)")
def test_fsync_order_file_then_rename_then_directory(tmp_path: Path) -> None:
    """The syscalls of one delivery: write tmp, fsync it, rename into new/, fsync new/."""
    script = (
        "import sys; from pathlib import Path; from workflow.mail.maildir import Maildirs;"
        f"m = Maildirs(Path({str(tmp_path)!r})); m.ensure('box'); print('BEGIN', flush=True);"
        f"m.deliver(['box'], {RAW!r})"
    )
    log = tmp_path / "trace"
    subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-o",
            str(log),
            "-e",
            "trace=openat,write,fsync,link,rename,unlink,unlinkat",
            sys.executable,
            "-c",
            script,
        ],
        check=True,
        capture_output=True,
    )
    lines = log.read_text().splitlines()
    begin = next(i for i, ln in enumerate(lines) if "BEGIN" in ln)
    calls = [ln.split(None, 1)[1] for ln in lines[begin + 1 :]]
    i_open = next(i for i, c in enumerate(calls) if "/box/tmp/" in c and "O_EXCL" in c)
    fd = calls[i_open].rsplit("=", 1)[1].strip()
    i_fsync_file = next(i for i, c in enumerate(calls) if c.startswith(f"fsync({fd})") and i > i_open)
    i_link = next(i for i, c in enumerate(calls) if c.startswith(("link(", "rename(")) and "/box/new/" in c)
    i_open_dir = next(i for i, c in enumerate(calls) if "/box/new" in c and "O_DIRECTORY" in c and i > i_link)
    dfd = calls[i_open_dir].rsplit("=", 1)[1].strip()
    i_fsync_dir = next(i for i, c in enumerate(calls) if c.startswith(f"fsync({dfd})") and i > i_open_dir)
    assert i_open < i_fsync_file < i_link < i_open_dir < i_fsync_dir


@pytest.mark.skipif(
    shutil.which("notmuch") is None, reason="notmuch not installed (scripts/system-packages installs it)"
)
def test_notmuch_indexes_and_finds_by_message_id(tmp_path: Path) -> None:
    md = Maildirs(tmp_path / "mail")
    md.deliver(["spec-reviewer"], RAW)
    cfg = tmp_path / "notmuch-config"
    cfg.write_text(f"[database]\npath={tmp_path / 'mail'}\n[new]\ntags=unread\n")
    env = {**os.environ, "NOTMUCH_CONFIG": str(cfg)}
    subprocess.run(["notmuch", "new", "--quiet"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        ["notmuch", "search", "--output=files", "id:m1@workflow.local"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "/spec-reviewer/new/" in out.stdout


@pytest.mark.skipif(shutil.which("mlist") is None, reason="mblaze not installed (scripts/system-packages installs it)")
def test_mblaze_lists_and_reads(tmp_path: Path) -> None:
    md = Maildirs(tmp_path)
    md.deliver(["box"], RAW)
    files = subprocess.run(["mlist", str(tmp_path / "box")], capture_output=True, text=True, check=True).stdout.split()
    assert len(files) == 1
    hdr = subprocess.run(["mhdr", "-h", "Message-ID", files[0]], capture_output=True, text=True, check=True).stdout
    assert hdr.strip() == "<m1@workflow.local>"


@pytest.mark.skipif(sys.platform != "linux", reason="sync_file_range is Linux's")
def test_writeback_starts_a_files_write_out_and_leaves_errors_to_the_fsync(tmp_path: Path) -> None:
    """The committer starts every file of a round writing before it fsyncs the first, so one
    journal commit covers all their allocations; on Linux the call must be found (else that
    silently stops), and a failing call must not raise: the fsync after it reports the error."""
    writeback = Writeback()
    assert writeback.available
    fd = os.open(tmp_path / "m", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"x" * 5000)
        writeback.start(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert (tmp_path / "m").read_bytes() == b"x" * 5000
    writeback.start(fd)  # closed: EBADF, ignored
