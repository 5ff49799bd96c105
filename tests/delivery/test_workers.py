"""`workflow smtpd --workers N`: every guarantee of one server holds across worker processes.

Each test runs the real command with two workers. Two connections open at the same time are
served by two different workers (the workers even out their connections), so a message on one
and its retry, or a reply, on the other cross the process boundary; the log line of each
message names the worker that stored it, and the tests check that it was two.
"""

from __future__ import annotations

import os
import re
import signal
import smtplib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.project import Project, with_smtp
from helpers.smtp import children, client, message, server_process
from workflow.mail.message import parse, to_lf

INTERNAL = "spec-reviewer-panel-internal"
REVIEWER = "spec-reviewer@workflow.local"


class Log:
    """The server's stderr, read as it comes (so a busy server never blocks on a full pipe)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.text())
            if m:
                return m
            time.sleep(0.02)
        raise AssertionError(f"not in the log after {timeout} s: {pattern}\n{self.text()}")

    def worker_of(self, mid: str) -> set[str]:
        """The workers that logged a line about this Message-ID."""
        return set(re.findall(rf"worker (\d+): {re.escape(mid)} ", self.text()))


@contextmanager
def workers(project_dir: Path, n: int = 2) -> Iterator[tuple[subprocess.Popen[str], int, Log]]:
    with server_process(project_dir, "--workers", str(n)) as (proc, port):
        log = Log(proc)
        yield proc, port, log


def stop(proc: subprocess.Popen[str], log: Log) -> int:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    log.thread.join(timeout=10)
    return code


def dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_until(check: Callable[[], bool], timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def open_server_side(port: int) -> int:
    """How many connections to ``port`` the server has not closed yet: its side of them ESTABLISHED
    or CLOSE_WAIT (asyncio closes the socket after the protocol's connection_lost)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if int(local.rsplit(":", 1)[1], 16) == port and state in ("01", "08"):
            count += 1
    return count


def resend(s: smtplib.SMTP, raw: bytes, sender: str = "spec-writer", to: str = "spec-reviewer") -> tuple[int, bytes]:
    """Send ``raw`` again on ``s`` (a retry), returning the DATA reply instead of raising."""
    s.ehlo_or_helo_if_needed()
    s.mail(f"{sender}@workflow.local")
    s.rcpt(f"{to}@workflow.local")
    return s.data(raw)


def lose_250_then_retry(first: smtplib.SMTP, second: smtplib.SMTP, raw: bytes) -> tuple[int, bytes]:
    """Send ``raw`` on ``first`` and drop its 250 on the floor; send the same bytes on ``second``."""
    first.sendmail("spec-writer@workflow.local", [REVIEWER], raw)
    return resend(second, raw)


def test_a_retry_reaching_another_worker_is_stored_once(project: Project) -> None:
    with workers(project.dir) as (proc, port, log), client(port) as a, client(port) as b:
        first = message(body="retried at once\n")
        code, text = lose_250_then_retry(a, b, first)  # the first worker has not indexed it yet
        assert code == 250 and b"duplicate" in text, text
        second = message(body="retried once it is indexed\n")
        b.sendmail("spec-writer@workflow.local", [REVIEWER], second)
        time.sleep(0.5)  # the index has caught up: the retry's worker finds it there
        code, text = resend(a, second)
        assert code == 250 and b"duplicate" in text, text
        changed = first.replace(b"retried at once", b"something else")
        try:
            b.sendmail("spec-writer@workflow.local", [REVIEWER], changed)
            raise AssertionError("the same Message-ID with other bytes was accepted")
        except smtplib.SMTPDataError as e:
            assert e.smtp_code == 550 and b"already delivered" in e.smtp_error
        assert stop(proc, log) == 0
    assert sorted(f.read_bytes() for f in project.new_files("spec-reviewer")) == sorted([to_lf(first), to_lf(second)])
    for raw in (first, second):
        assert len(log.worker_of(parse(raw).message_id or "")) == 2, log.text()  # both workers saw it


def test_a_reply_on_another_worker_sees_an_internal_thread_stored_a_moment_ago(project: Project) -> None:
    """Visibility reads every committed copy, whichever worker stored it and before it is indexed."""
    sender = "spec-reviewer-panel.claude"
    refused = 0
    with workers(project.dir) as (proc, port, log), client(port) as a, client(port) as b:
        for i in range(40):
            inner = message(sender, (INTERNAL,), body=f"inside {i}\n")
            a.sendmail(f"{sender}@workflow.local", [f"{INTERNAL}@workflow.local"], inner)
            mid = parse(inner).message_id or ""
            leak = message(sender, ("spec-writer",), body="outside\n", in_reply_to=mid, references=[mid])
            try:
                b.sendmail(f"{sender}@workflow.local", ["spec-writer@workflow.local"], leak)
            except smtplib.SMTPDataError as e:
                assert e.smtp_code == 550 and b"internal-thread-stays-inside" in e.smtp_error
                refused += 1
        assert stop(proc, log) == 0
    assert refused == 40
    assert project.new_files("spec-writer") == []
    assert set(re.findall(r"worker (\d+): (?:refused )?\S+ from", log.text())) == {"1", "2"}, log.text()


def test_sigkill_of_one_worker_mid_load_loses_nothing_acked_and_it_is_replaced(project: Project) -> None:
    acked: list[bytes] = []
    lock = threading.Lock()
    stop_sending = threading.Event()
    errors: list[BaseException] = []

    def sender(port: int, n: int) -> None:
        i = 0
        s: smtplib.SMTP | None = None
        while not stop_sending.is_set() and i < 300:
            raw = message(body=f"client {n} message {i}\n" + "z" * 1500 + "\n")
            for attempt in range(20):  # as a mail client would: on a broken connection, reconnect and retry
                try:
                    if s is None:
                        s = client(port)
                    s.sendmail("spec-writer@workflow.local", [REVIEWER], raw)
                    break
                except (OSError, smtplib.SMTPException) as e:
                    s = None
                    if attempt == 19:
                        errors.append(e)
                        return
                    time.sleep(0.05)
            with lock:
                acked.append(raw)
            i += 1
        if s is not None:
            s.quit()

    with workers(project.dir) as (proc, port, log):
        before = children(proc.pid)
        assert len(before) == 2
        threads = [threading.Thread(target=sender, args=(port, n)) for n in range(4)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acked) >= 60)
        victim = before[0]
        os.kill(victim, signal.SIGKILL)
        log.wait_for(rf"worker \d \(pid {victim}\) was killed by SIGKILL; pid \d+ serves in its place")
        count = len(acked)
        wait_until(lambda: len(acked) >= count + 60)  # the replacement and the survivor serve on
        stop_sending.set()
        for t in threads:
            t.join(timeout=60)
        after = children(proc.pid)
        assert len(after) == 2 and victim not in after and before[1] in after
        assert stop(proc, log) == 0
    assert not errors, errors
    stored = [f.read_bytes() for f in project.new_files("spec-reviewer")]
    acked = [to_lf(raw) for raw in acked]  # stored with LF line ends
    assert len(stored) == len(set(stored)), "a retry after the kill was stored twice"
    assert set(acked) <= set(stored), "a message that got 250 is missing after SIGKILL of its worker"
    assert set(stored) <= set(acked)  # what the killed worker stored without answering was retried until acked
    with project.app.index() as ix:  # the replacement indexed what the killed one left unindexed
        assert len(ix.query(["spec-reviewer"])) == len(stored)


def test_the_connection_cap_counts_every_worker(project: Project) -> None:
    import socket

    p = with_smtp(project, "max_connections = 3\n")
    with workers(p.dir) as (proc, port, log):
        held = [client(port) for _ in range(3)]  # logged in: a newcomer never takes their places
        for _ in range(4):  # whichever worker the kernel hands it to, the fourth is one too many
            extra = socket.create_connection(("127.0.0.1", port))
            assert extra.recv(100).startswith(b"421 4.7.0")
            extra.close()
        held.pop().close()
        time.sleep(0.2)
        with client(port) as s:  # a place is free again
            s.sendmail("spec-writer@workflow.local", [REVIEWER], message())
        victim = children(proc.pid)[0]
        os.kill(victim, signal.SIGKILL)  # the places its connections held are given back
        log.wait_for(rf"pid {victim}\) was killed by SIGKILL; pid \d+ serves in its place")
        for s in held:
            s.close()
        time.sleep(0.2)
        opened = [client(port) for _ in range(3)]
        for s in opened:
            s.noop()
            s.close()
        assert stop(proc, log) == 0


def test_sigterm_stops_every_worker_and_sums_their_outcomes(project: Project) -> None:
    with workers(project.dir) as (proc, port, log), client(port) as a, client(port) as b:
        kids = children(proc.pid)
        a.sendmail("spec-writer@workflow.local", [REVIEWER], message())
        b.sendmail("spec-writer@workflow.local", [REVIEWER], message())
        try:
            b.sendmail("spec-writer@workflow.local", ["spec-reveiwer@workflow.local"], message())
        except smtplib.SMTPRecipientsRefused:
            pass
        assert stop(proc, log) == 0
    assert all(dead(pid) for pid in kids)
    text = log.text()
    assert "stopped: 2 delivered, 0 refused, 0 failed (2 workers)" in text, text
    assert not project.app.config.state.smtpd.exists()


def test_workers_do_not_outlive_a_killed_parent(project: Project) -> None:
    with workers(project.dir) as (proc, port, log):
        kids = children(proc.pid)
        proc.kill()
        proc.wait()
        wait_until(lambda: all(dead(pid) for pid in kids))


FORKED_AFTER_ITS_PARENT_DIED = """
import os, sys, time
from workflow.delivery.server.workers import die_with_parent
parent = os.getpid()
pid = os.fork()
if pid == 0:
    while os.getppid() == parent:  # the parent exits first: as when it is killed as it forks
        time.sleep(0.01)
    die_with_parent(parent)
    time.sleep(30)
    os._exit(0)
print(pid, flush=True)
os._exit(0)
"""


def test_a_worker_forked_as_its_parent_is_killed_does_not_outlive_it() -> None:
    # A replacement worker forked just before the parent is SIGKILLed first runs with another
    # parent already: asked for its parent's pid then, it would wait for the wrong one to die.
    out = subprocess.run(
        [sys.executable, "-c", FORKED_AFTER_ITS_PARENT_DIED], capture_output=True, text=True, timeout=30
    )
    child = int(out.stdout)
    wait_until(lambda: dead(child), timeout=10)


def test_a_worker_that_keeps_dying_stops_the_server(project: Project) -> None:
    with workers(project.dir) as (proc, port, log):
        for n in range(5):
            victim = children(proc.pid)[-1]  # the newest: the same worker each time, as its replacement
            os.kill(victim, signal.SIGKILL)
            if n < 4:
                log.wait_for(rf"pid {victim}\) was killed by SIGKILL; pid \d+ serves in its place")
        assert proc.wait(timeout=60) != 0
        log.thread.join(timeout=10)
    assert re.search(r"worker \d died 5 times in 30 s; stopping", log.text()), log.text()


def test_connections_are_evened_out_across_workers(project: Project) -> None:
    """The kernel spreads connections by a hash of their addresses; the workers pass them on so
    that four open connections are served two by each worker, every time."""
    for _ in range(3):
        with workers(project.dir) as (proc, port, log):
            sessions = [client(port) for _ in range(4)]
            for s in sessions:
                s.sendmail("spec-writer@workflow.local", [REVIEWER], message())
            for s in sessions:
                s.quit()
            assert stop(proc, log) == 0
        served = re.findall(r"worker (\d+): <[^>]+> from", log.text())
        assert sorted(served) == ["1", "1", "2", "2"], log.text()


def test_connections_that_arrive_at_once_are_evened_out_too(project: Project) -> None:
    """Four clients that connect at the same moment, as a pool of senders starting up does: a
    connection passed to a worker counts against it before that worker has taken it, so a second
    one is not passed after it (three on one worker, one on the other, one start in five)."""
    with workers(project.dir) as (proc, port, log):
        for trial in range(12):
            together, sent = threading.Barrier(4), threading.Barrier(4)
            errors: list[BaseException] = []

            def send(
                go: threading.Barrier = together,
                done: threading.Barrier = sent,
                n: int = trial,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    go.wait(timeout=20)
                    with client(port) as s:
                        s.sendmail("spec-writer@workflow.local", [REVIEWER], message(body=f"trial {n}\n"))
                        done.wait(timeout=20)  # every connection open until all four are served
                except BaseException as e:
                    errors.append(e)

            # the last trial's connections count against their workers until the server has closed
            # them (a worker counts one until its connection_lost): start from none open
            wait_until(lambda: not open_server_side(port))
            start = len(log.text())
            threads = [threading.Thread(target=send) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            assert not errors, errors
            wait_until(lambda s=start: len(re.findall(r"worker \d+: <[^>]+> from", log.text()[s:])) == 4)
            served = re.findall(r"worker (\d+): <[^>]+> from", log.text()[start:])
            assert sorted(served) == ["1", "1", "2", "2"], f"trial {trial + 1}: {served}\n{log.text()}"
        assert stop(proc, log) == 0


def test_copies_a_killed_worker_told_of_but_never_indexed_still_count(project: Project) -> None:
    """A worker killed right after its 250, before it indexed the copy: the other worker still
    recognises a retry of it (by the copy's place), and a reply into its internal thread waits
    for the index, rescans, and is refused."""
    sender = "spec-reviewer-panel.claude"
    with workers(project.dir) as (proc, port, log), client(port) as a, client(port) as b:
        first = message(body="which worker serves a?\n")
        a.sendmail("spec-writer@workflow.local", [REVIEWER], first)
        row = int(log.wait_for(rf"worker (\d): {re.escape(parse(first).message_id or '')} ").group(1))
        victim = children(proc.pid)[row - 1]  # workers are forked in order
        inner = message(sender, (INTERNAL,), body="inside\n")
        a.sendmail(f"{sender}@workflow.local", [f"{INTERNAL}@workflow.local"], inner)
        os.kill(victim, signal.SIGKILL)  # well within the 50 ms before it indexes
        mid = parse(inner).message_id or ""
        code, text = resend(b, inner, sender, INTERNAL)
        assert code == 250 and b"duplicate" in text, text
        leak = message(sender, ("spec-writer",), body="outside\n", in_reply_to=mid, references=[mid])
        started = time.monotonic()
        try:
            b.sendmail(f"{sender}@workflow.local", ["spec-writer@workflow.local"], leak)
            raise AssertionError("a reply into the internal thread reached spec-writer")
        except smtplib.SMTPDataError as e:
            assert e.smtp_code == 550 and b"internal-thread-stays-inside" in e.smtp_error, e.smtp_error
        assert time.monotonic() - started >= 1.5  # it waited for the dead worker's index rows, then rescanned
        log.wait_for(rf"pid {victim}\) was killed by SIGKILL; pid \d+ serves in its place")
        assert stop(proc, log) == 0
    assert project.new_files("spec-writer") == []
    assert len(project.new_files("spec-reviewer-panel.claude")) == 1
