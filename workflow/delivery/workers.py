"""Workers: ``workflow smtpd --workers N`` — N server processes on one port, and a parent that keeps them.

One server process is bound to one core (asyncio and the GIL); this spreads ingest over all of
them. The parent:

* listens on the port (no SO_REUSEPORT: nothing else can join it) and on the mail root's Unix
  socket (``delivery.local``), and keeps both open, so a worker restarting cannot lose them;
* indexes what a crash left unindexed, once, before any worker starts;
* forks N workers, each a whole ``smtpd.Server`` (event loop, group committer, index
  connection) accepting on the parent's sockets, counting on a shared ``tally.Board``. The
  first awake accepts, so one that gets a connection while another has fewer passes it on;
* logs "listening on HOST:PORT" once every worker is ready, and records the address;
* replaces a worker that dies (its replacement first indexes what it left), and gives up — stopping
  the others — when a worker keeps dying at once (``RESTARTS`` within ``RESTART_WINDOW``);
* on SIGTERM or SIGINT, stops every worker as a single server stops (each stores and answers
  what is in DATA), then logs the workers' totals. A worker whose parent dies stops the same way.

The guarantees are those of one server, because each rests on something every worker shares:
a ``250`` follows the fsyncs and the index rows of its copies (``delivery.commit``), and every
check — a retry after a lost ``250``, visibility, sealed reviews — reads the shared index.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from workflow.core.config import Config
from workflow.core.errors import ConfigError, WorkflowError
from workflow.delivery import address, local
from workflow.delivery.commit import Copies
from workflow.delivery.deliverer import Deliverer
from workflow.delivery.listeners import reserve
from workflow.delivery.smtp_protocol import Admission
from workflow.delivery.smtpd import Server, new_loop, secure_mail_root, stopped
from workflow.delivery.tally import CONNECTIONS, INCOMING, SERVING, TELLS, WIDTH, Board, Tally
from workflow.mail.index import Index
from workflow.mail.maildir import Entry, Maildirs

log = logging.getLogger(__name__)

RESTARTS = 5  # a worker dying this often within RESTART_WINDOW seconds stops the server
RESTART_WINDOW = 30.0
START_TIMEOUT = 60.0
STOP_GRACE = 60.0  # then a worker still running is killed
SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
PR_SET_PDEATHSIG = 1
TELL_MAX = 200_000  # bytes in one datagram of copies told; a larger round is indexed before its 250
SETTLE = 2.0  # seconds to wait for another worker to index what it told of, before rescanning
FORGET = 600.0  # seconds after which a copy told of but never said indexed is forgotten


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class Worker:
    """One worker slot: its process, and when it last started."""

    row: int
    pid: int = 0
    started: list[float] = field(default_factory=list)


class Supervisor:
    """The parent: start the workers, keep them running, stop them."""

    def __init__(self, config: Config, deliverer: Deliverer, host: str, port: int, count: int) -> None:
        self.config, self.deliverer, self.host, self.count = config, deliverer, host, count
        self.port = port
        self.board = Board(count, shared=True)
        self.lanes = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(count)]  # (to, from) worker i
        self.workers = [Worker(i) for i in range(count)]
        self.held: socket.socket | None = None
        self.local: list[socket.socket] = []  # the owner's and the runs' sockets
        self.made: list[tuple[str, tuple[int, int] | None]] = []

    def run(self, ready: Callable[[int], None]) -> Tally:
        """Serve until SIGTERM or SIGINT; returns the workers' totals as one tally."""
        if threading.active_count() > 1:
            raise WorkflowError("workflow smtpd --workers must start the workers before any thread")
        self.held = held = reserve(self.host, self.port)
        self.port = held.getsockname()[1]
        try:
            for path in map(str, self.config.state.server_sockets):
                self.local.append(local.claim(path))
                self.made.append((path, local.identity(path)))
        except ConfigError:
            held.close()
            self._close_sockets()
            raise
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            secure_mail_root(self.config.mail_root)
            with self.deliverer.open_index() as index:  # before the fork: no connection crosses it
                index.refresh()  # copies stored before a crash but never indexed
            pipes = {w.row: self._spawn(w, refresh=False) for w in self.workers}
            self._await_ready(pipes)
            address.record(self.config, self.host, self.port)
            log.info(
                "listening on %s:%d (%d workers, mail root %s)", self.host, self.port, self.count, self.config.mail_root
            )
            ready(self.port)
            self._watch()
        finally:
            self._stop_all()
            address.forget(self.config)  # only the record this process wrote
            held.close()
            self._close_sockets()
            for a, b in self.lanes:
                a.close()
                b.close()
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return self.totals()

    def _close_sockets(self) -> None:
        for sock in self.local:
            sock.close()
        for path, made in self.made:
            local.remove(path, made)

    def totals(self) -> Tally:
        total = Tally()
        for f in ("delivered", "refused", "failed"):
            setattr(total, f, self.board.total(f))
        return total

    # ---------------------------------------------------------------- the workers' lives

    def _spawn(self, w: Worker, refresh: bool) -> int:
        """Fork worker ``w``; returns the read end of the pipe it says "ready" (or why not) on."""
        r, wr = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()  # or the worker would write what the parent had buffered once more
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(r)
            _worker_main(self, w.row, Ready(wr), refresh, parent)
        os.close(wr)
        w.pid = pid
        w.started = [t for t in w.started if time.monotonic() - t < RESTART_WINDOW] + [time.monotonic()]
        return r

    def _await_ready(self, pipes: dict[int, int]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        problems: list[str] = []
        waiting = dict(pipes)
        while waiting and time.monotonic() < deadline:
            readable, _, _ = select.select(list(waiting.values()), [], [], max(0.0, deadline - time.monotonic()))
            for fd in readable:
                row = next(k for k, v in waiting.items() if v == fd)
                said = os.read(fd, 4096).decode("utf-8", "replace")
                os.close(fd)
                del waiting[row]
                if said != "ready":
                    problems.append(said or f"worker {row + 1} exited before it was ready")
        for fd in waiting.values():
            os.close(fd)
        if waiting and not problems:
            problems.append(f"{len(waiting)} worker(s) not ready after {START_TIMEOUT:.0f} s")
        if problems:
            raise WorkflowError(problems[0])

    def _watch(self) -> None:
        while True:
            info = signal.sigwaitinfo(SIGNALS)
            if info.si_signo in (signal.SIGTERM, signal.SIGINT):
                log.info("signal received: stopping %d workers", self.count)
                return
            self._reap()
            if not any(w.pid for w in self.workers):
                log.info("every worker has stopped")
                return

    def _reap(self) -> None:
        """Replace every worker that died; raise when one keeps dying. A worker that stopped
        cleanly (someone sent it SIGTERM) was asked to: it is not replaced."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            w = next((w for w in self.workers if w.pid == pid), None)
            if w is None:
                continue
            w.pid = 0
            self.board.clear(w.row, "connections", "in_flight", "serving", "incoming")  # what it held is gone with it
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                log.info("worker %d (pid %d) stopped", w.row + 1, pid)
                continue
            self._replace(w, _how(status), pid)

    def _replace(self, w: Worker, how: str, pid: int) -> None:
        """Start another worker in ``w``'s place (it first indexes what the dead one left);
        a start that fails counts as one more death."""
        while True:
            if len(w.started) >= RESTARTS:
                raise WorkflowError(
                    f"worker {w.row + 1} died {RESTARTS} times in {RESTART_WINDOW:.0f} s; stopping (see the log above)"
                )
            pipe = self._spawn(w, refresh=True)
            try:
                self._await_ready({w.row: pipe})
            except WorkflowError as e:
                log.warning("worker %d (pid %d) could not start: %s", w.row + 1, w.pid, e)
                _signal(w.pid, signal.SIGKILL)
                os.waitpid(w.pid, 0)
                w.pid = 0
                continue
            log.warning("worker %d (pid %d) %s; pid %d serves in its place", w.row + 1, pid, how, w.pid)
            return

    def _stop_all(self) -> None:
        """SIGTERM every worker, wait for each (killing it after STOP_GRACE)."""
        alive = {w.pid: w for w in self.workers if w.pid}
        for pid in alive:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while alive:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                if pid in alive:
                    alive.pop(pid).pid = 0
                continue
            if time.monotonic() > deadline:
                for pid in alive:
                    log.warning("worker pid %d did not stop in %.0f s: killed", pid, STOP_GRACE)
                    _signal(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)


class Ready:
    """A worker's pipe to the parent: "ready" once it listens, or why it could not start."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def say(self, text: str) -> bool:
        """Send ``text`` once; False when it was sent already (the worker had started)."""
        if self.fd is None:
            return False
        try:
            os.write(self.fd, text.encode("utf-8", "replace")[:4000])
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
        return True


def _worker_main(sup: Supervisor, row: int, ready: Ready, refresh: bool, parent: int) -> None:
    """A forked worker of ``parent``: serve until SIGTERM (or the parent's death), then exit the
    process."""
    code = 0
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        die_with_parent(parent)
        for handler in logging.getLogger().handlers:
            handler.addFilter(_Prefix(row))
        _serve_worker(sup, row, ready, refresh)
    except BaseException as e:  # a forked child must never return into the parent's code
        code = 1
        if not ready.say(f"worker {row + 1}: {e}"):
            log.exception("failed")
    finally:
        logging.shutdown()
        sys.stderr.flush()
        os._exit(code)


class Crew(Tally):
    """One worker's dealings with the others, over a Unix datagram socket per worker (its inbox):

    * ``admit`` (the protocol's gate): the shared connection cap; and a new connection that
      landed here while another worker has fewer open is passed to that one (SCM_RIGHTS) before
      a byte is sent — the receiver serves it as if it had accepted it, and it counts against the
      receiver from the moment it is sent (the board's ``incoming``);
    * ``tell`` (the committer's peers): each round's copies, before they are moved into new/, and
      later that they are indexed (or undone);
    * ``stored`` and ``settle`` (the handler's others): what the others told, read before a
      check whenever their tell counts (on the board) moved since the inbox was last read, so a
      retry is recognised and a reply's checks wait for the index, whichever worker stored the
      copies. A worker that dies between telling and indexing is covered: its copies
      are known by place (a retry compares the bytes there, or finds nothing and stores), and
      ``settle`` rescans their mailboxes after ``SETTLE`` seconds.
    """

    def __init__(
        self, board: Board, row: int, lanes: list[tuple[socket.socket, socket.socket]], maildirs: Maildirs
    ) -> None:
        super().__init__(board, row)
        self.row = row
        self.lanes = [to for to, _ in lanes]
        self.inbox = lanes[row][1]
        self.maildirs = maildirs
        self.passed: set[object] = set()  # peers passed to this worker: served here, never passed on
        self.others: dict[str, list[Entry]] = {}
        self.told: set[str] = set()  # every Message-ID told of (stored) since this worker started
        self.heard: dict[str, float] = {}  # when each of ``others`` was told (oldest first)
        self.serve: Callable[[socket.socket], asyncio.Future[Any]] | None = None
        self._heard_up_to = -1  # the others' tell count when the inbox was last read to the end
        self.tasks: set[asyncio.Future[Any]] = set()

    def keep(self, task: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """Hold a task until it is done (the loop keeps only a weak reference)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # ---------------------------------------------------------------- connections

    def admit(self, cap: int, transport: Any = None) -> Admission:
        if transport is None:
            return super().admit(cap, transport)
        peer = transport.get_extra_info("peername")
        if peer in self.passed:  # passed here: served here, and no longer incoming
            self.passed.discard(peer)
            with self.board.locked():
                self.incoming = max(0, self.incoming - 1)
                return self.take(cap)
        if self._pass(transport):
            return "moved"
        return super().admit(cap, transport)

    def _pass(self, transport: Any) -> bool:
        """Pass a new connection to the worker with the fewest, counting those passed to it and
        not yet taken (it counts them as incoming from the moment they are sent)."""
        sock = transport.get_extra_info("socket")
        if sock is None:
            return False
        cells, rows = self.board.cells, self.board.rows
        with self.board.locked():
            loads = [  # a row no worker serves now (one died, or is starting) is passed nothing
                cells[r * WIDTH + CONNECTIONS] + cells[r * WIDTH + INCOMING] if cells[r * WIDTH + SERVING] else 1 << 62
                for r in range(rows)
            ]
            target = min(range(rows), key=lambda r: (loads[r], r != self.row))
            if loads[target] >= loads[self.row]:
                return False
            cells[target * WIDTH + INCOMING] += 1
        try:
            self.lanes[target].sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [sock.fileno()]))])
        except OSError:  # its inbox is full (it is restarting): serve it here
            with self.board.locked():
                cells[target * WIDTH + INCOMING] = max(0, cells[target * WIDTH + INCOMING] - 1)
            return False
        return True

    # ---------------------------------------------------------------- copies stored

    def tell(self, what: Literal["stored", "settled"], copies: Copies) -> bool:
        lines = ["+" if what == "stored" else "-"]
        lines += [
            f"{mid} {e.mailbox} {e.key}" for mid, entries in copies for e in entries or [Entry("-", "-", "", "", "")]
        ]
        data = "\n".join(lines).encode("utf-8", "surrogateescape")
        if len(data) > TELL_MAX:
            return False
        told = True
        for row, lane in enumerate(self.lanes):
            if row != self.row:
                try:
                    lane.send(data)
                except OSError:  # its inbox is full or gone: it cannot know, so this round is indexed first
                    told = False
        self.tells += 1  # after the sends: whoever reads the new count finds the datagrams queued
        return told

    def stored(self) -> Mapping[str, Sequence[Entry]]:
        if self._told_count() != self._heard_up_to:  # else nothing was told since the last hear
            self.hear()
        return self.others

    def _told_count(self) -> int:
        cells = self.board.cells
        return sum(cells[r * WIDTH + TELLS] for r in range(self.board.rows) if r != self.row)

    async def settle(self, message_ids: Sequence[str], index: Index) -> None:
        wanted = {m.lower() for m in message_ids}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE
        while True:
            self.hear()
            left = [m for m in self.others if m.lower() in wanted]
            if not left or loop.time() > deadline:
                break
            await asyncio.sleep(0.005)
        if left:  # told of, never indexed: the worker that stored them died in between
            index.refresh({e.mailbox for m in left for e in self.others[m]})
            for m in left:
                self.others.pop(m, None)
                self.heard.pop(m, None)

    # ---------------------------------------------------------------- the inbox

    def hear(self) -> None:
        """Take in everything waiting in this worker's inbox: passed connections, copies told."""
        told = self._told_count()  # before reading: every tell it counts is queued, so read below
        while True:
            try:
                data, ancillary, _, _ = self.inbox.recvmsg(TELL_MAX, socket.CMSG_SPACE(16 * 4), socket.MSG_CMSG_CLOEXEC)
            except BlockingIOError:
                self._heard_up_to = told  # read to the end
                break
            except InterruptedError:
                break
            if ancillary or data == b"c":
                self._serve_passed(ancillary)
                continue
            kind, *lines = data.decode("utf-8", "surrogateescape").split("\n")
            now = time.monotonic()
            for line in lines:
                try:
                    mid, mailbox, key = line.split(" ")
                except ValueError:  # not a line a worker writes: nothing to remember
                    continue
                if kind == "+":
                    self.told.add(mid)
                    path = f"{self.maildirs.dir(mailbox)}/new/{key}"
                    self.others.setdefault(mid, []).append(Entry(mailbox, key, "new", "", path))
                    self.heard[mid] = now
                else:  # settled: that copy (or, "-", every copy of that id) need not be remembered
                    kept = [
                        e for e in self.others.get(mid, ()) if mailbox != "-" and (e.mailbox, e.key) != (mailbox, key)
                    ]
                    if kept:
                        self.others[mid] = kept
                    else:
                        self.others.pop(mid, None)
                        self.heard.pop(mid, None)
        while self.heard:  # forget what was never said indexed (its worker died; its replacement indexed it)
            mid, when = next(iter(self.heard.items()))
            if time.monotonic() - when < FORGET:
                break
            self.heard.pop(mid)
            self.others.pop(mid, None)

    def _serve_passed(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        for level, kind, data in ancillary:
            if level != socket.SOL_SOCKET or kind != socket.SCM_RIGHTS:
                continue
            for fd in array("i", data[: len(data) - len(data) % 4]):
                sock = socket.socket(fileno=fd)
                try:
                    peer = sock.getpeername()
                except OSError:  # the client has gone already
                    sock.close()
                    self._taken()
                    continue
                if self.serve is None:
                    sock.close()
                    self._taken()
                    continue
                self.passed.add(peer)
                self.serve(sock).add_done_callback(functools.partial(self._not_served, peer))

    def _taken(self, peer: object = None) -> None:
        """A connection passed here is no longer incoming: served, gone, or refused."""
        self.passed.discard(peer)
        with self.board.locked():
            self.incoming = max(0, self.incoming - 1)

    def _not_served(self, peer: object, task: asyncio.Future[Any]) -> None:
        if peer in self.passed and (task.cancelled() or task.exception() is not None):
            self._taken(peer)  # it never reached ``admit``


def _serve_worker(sup: Supervisor, row: int, ready: Ready, refresh: bool) -> None:
    async def main() -> None:
        crew = Crew(sup.board, row, sup.lanes, sup.deliverer.maildirs)
        server = Server(
            sup.config,
            sup.deliverer,
            host=sup.host,
            port=sup.port,
            tally=crew,
            peers=crew,
            others=crew,
            worker=row,
            refresh=refresh,
            tcp=sup.held if sup.held is not None else False,
            sockets=sup.local,
        )
        await server.start()
        assert server.factory is not None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        factory = server.factory
        crew.serve = lambda sock: crew.keep(loop.create_task(loop.connect_accepted_socket(factory, sock)))
        crew.inbox.setblocking(False)
        for to, _ in sup.lanes:
            to.setblocking(False)
        loop.add_reader(crew.inbox, crew.hear)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        crew.serving = os.getpid()
        ready.say("ready")
        await stop.wait()
        crew.serving = 0
        loop.remove_reader(crew.inbox)
        await server.stop()

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(main())


class _Prefix(logging.Filter):
    """Say which worker logged a line."""

    def __init__(self, row: int) -> None:
        super().__init__()
        self.tag = f"worker {row + 1}: "

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "_worker_tagged", False):
            record.msg = self.tag + str(record.msg)
            record._worker_tagged = True
        return True


def die_with_parent(parent: int) -> None:
    """SIGTERM this forked process when ``parent`` (the pid that forked it, taken before the fork)
    dies (Linux), so no worker outlives its server. A parent that died before the request took
    effect, even before the child ran at all, is seen too: the child then has another parent
    already (asking the child for its parent's pid would name that one)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def supervise(
    config: Config, deliverer: Deliverer, host: str, port: int, count: int, ready: Callable[[int], None]
) -> Tally:
    """Run ``count`` workers until SIGTERM or SIGINT; the totals of their outcomes."""
    sup = Supervisor(config, deliverer, host, port, count)
    total = sup.run(ready)
    stopped(total.delivered, total.refused, total.failed, f" ({count} workers)")
    return total
