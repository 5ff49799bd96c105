"""Durability: ack implies durable (strace), SIGKILL mid-stream loses nothing acked, disk full is 4xx —
each for one server process and for two workers (`workflow smtpd --workers 2`)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import smtplib
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers.project import Project
from helpers.smtp import children, client, message, server_process, serving
from workflow.app import App
from workflow.core.config import load_config
from workflow.mail.message import parse

WORKERS = pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])


def send(port: int, raw: bytes, to: str = "spec-reviewer@workflow.local") -> None:
    with client(port) as s:
        s.sendmail("spec-writer@workflow.local", [to], raw)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (scripts/system-packages installs it)")
@WORKERS
def test_every_250_follows_fsync_rename_and_directory_fsync(project: Project, tmp_path: Path, workers: str) -> None:
    trace = tmp_path / "trace"
    wrap = [
        "strace",
        "-f",
        "-qq",
        "-s",
        "300",
        "-o",
        str(trace),
        "-e",
        "trace=openat,close,fsync,link,rename,sendto,write",
    ]
    sent = []
    with server_process(project.dir, "--workers", workers, wrap=wrap) as (proc, port):
        for i in range(3):
            raw = message(body=f"message {i}\n")
            send(port, raw)
            sent.append(parse(raw).message_id)
    lines = [re.sub(r"^\d+\s+", "", ln) for ln in trace.read_text().splitlines()]
    acks = [i for i, ln in enumerate(lines) if "250 2.0.0 <" in ln and ("sendto(" in ln or "write(" in ln)]
    assert len(acks) == 3

    def dir_fd_at(i: int) -> set[str]:
        """fds that refer to spec-reviewer/new at line i (opened before, not closed since)."""
        fds: set[str] = set()
        for ln in lines[:i]:
            if '/spec-reviewer/new"' in ln and "O_DIRECTORY" in ln and ln.startswith("openat("):
                fds.add(ln.rsplit("=", 1)[1].strip())
            elif ln.startswith("close("):
                fds.discard(ln[6:].split(")")[0])
        return fds

    prev = 0
    for n, ack in enumerate(acks):
        assert sent[n] in lines[ack]
        window = lines[prev:ack]
        tmp_open = [(i, ln) for i, ln in enumerate(window) if "/spec-reviewer/tmp/" in ln and "O_EXCL" in ln]
        assert tmp_open, "no tmp file created before the 250"
        i_open, open_line = tmp_open[-1]
        fd = open_line.rsplit("=", 1)[1].strip()
        i_fsync = next(i for i, ln in enumerate(window) if i > i_open and ln.startswith(f"fsync({fd})"))
        i_move = next(
            i
            for i, ln in enumerate(window)
            if i > i_fsync and ln.startswith(("rename(", "link(")) and "/spec-reviewer/new/" in ln
        )
        i_dirsync = next(
            i
            for i, ln in enumerate(window)
            if i > i_move and ln.startswith("fsync(") and ln[6:].split(")")[0] in dir_fd_at(prev + i)
        )
        assert i_open < i_fsync < i_move < i_dirsync
        prev = ack


@WORKERS
def test_sigkill_mid_stream_loses_nothing_acked(project: Project, workers: str) -> None:
    acked: list[bytes] = []
    sent: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(port: int, n: int) -> None:
        i = 0
        while not stop.is_set() and i < 400:
            raw = message(body=f"client {n} message {i}\n" + "z" * 1500 + "\n")
            with lock:
                sent.append(raw)
            try:
                send(port, raw)
            except (OSError, smtplib.SMTPException):
                return
            with lock:
                acked.append(raw)
            i += 1

    with server_process(project.dir, "--workers", workers) as (proc, port):
        threads = [threading.Thread(target=client, args=(port, n)) for n in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(acked) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        workers_pids = children(proc.pid)
        for pid in workers_pids:  # the whole server dies at once: every worker, then the parent
            os.kill(pid, signal.SIGKILL)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pid in workers_pids:
            _wait_gone(pid)
        stop.set()
        for t in threads:
            t.join(timeout=20)
    assert len(acked) >= 40
    stored = {f.read_bytes() for f in project.new_files("spec-reviewer")}
    for raw in acked:
        assert raw in stored, "a message that got 250 is missing after SIGKILL"
    sent_set = set(sent)
    for data in stored:
        assert data in sent_set, "something partial or foreign is in new/"
        assert parse(data).message_id
    # The restarted server serves, and indexes what the killed one stored but never indexed.
    with server_process(project.dir, "--workers", workers) as (proc, port):
        send(port, message(body="after restart\n"))
    assert len(project.new_files("spec-reviewer")) == len(stored) + 1
    with project.app.index() as ix:
        assert len(ix.query(["spec-reviewer"])) == len(stored) + 1


def _wait_gone(pid: int) -> None:
    """Until ``pid`` has exited (a zombie has: nothing it does is left to happen)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} still runs after SIGKILL")


@WORKERS
def test_sigterm_stops_cleanly(project: Project, workers: str) -> None:
    with server_process(project.dir, "--workers", workers) as (proc, port):
        send(port, message())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        rest = proc.stderr.read()
        assert "stopped: 1 delivered" in rest
        assert re.search(r"<[^>]+> from spec-writer@workflow.local to spec-reviewer@workflow.local: delivered", rest)
    with pytest.raises(OSError):
        smtplib.SMTP("127.0.0.1", port, timeout=2)


def _tiny_fs(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True).returncode
        == 0
    )


@WORKERS
def test_disk_full_is_451_new_stays_clean_and_server_keeps_serving(
    project: Project, tmp_path: Path, workers: str
) -> None:
    root = tmp_path / "tiny"
    mounted = _tiny_fs(root)
    assert mounted, "cannot mount a tmpfs here: this test needs root (CI runs as root)"
    try:
        toml = (project.dir / "workflow.toml").read_text().replace('mail_root = "mail"', f'mail_root = "{root}"')
        (project.dir / "workflow.toml").write_text(toml)
        app = App(load_config(project.dir / "workflow.toml", env={}))
        with serving(app, workers) as port:
            send(port, message(body="small\n"))
            filler = root / "filler"
            with open(filler, "wb", buffering=0) as f:  # fill the disk to the last few KB
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError:
                    pass
            os.truncate(filler, max(0, filler.stat().st_size - 24 * 1024))
            with pytest.raises(smtplib.SMTPDataError) as e:
                send(port, message(body="big\n" + "b" * 200_000 + "\n"))
            assert e.value.smtp_code == 451 and b"No space" not in e.value.smtp_error
            assert len(list((root / "spec-reviewer" / "new").iterdir())) == 1
            assert list((root / "spec-reviewer" / "tmp").iterdir()) == []
            send(port, message(body="fits\n"))
            filler.unlink()
            send(port, message(body="big\n" + "b" * 200_000 + "\n"))
        assert len(list((root / "spec-reviewer" / "new").iterdir())) == 3
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)
