"""Workers: ``workflow smtpd --workers N`` — N server processes on one port, and a parent that keeps them.

One server process is bound to one core (asyncio and the GIL); this spreads ingest over all of
them. The parent:

* listens on the port (no SO_REUSEPORT: nothing else can join it) and on the mail root's Unix
  socket (``delivery.local``), and keeps both open, so a worker restarting cannot lose them;
* indexes what a crash left unindexed, once, before any worker starts;
* forks N workers, each a whole ``smtpd.Server`` (event loop, group committer, index
  connection) accepting on the parent's sockets, counting on a shared ``tally.Counters``. The
  first awake accepts, so one that gets a connection while another has fewer passes it on;
* logs "listening on HOST:PORT" once every worker is ready, and records the address;
* replaces a worker that dies (its replacement first indexes what it left), and gives up — stopping
  the others — when a worker keeps dying at once (``RESTARTS`` within ``RESTART_WINDOW``);
* on SIGTERM or SIGINT, stops every worker as a single server stops (each stores and answers
  what is in DATA), then logs the workers' totals. A worker whose parent dies stops the same way.

The guarantees are those of one server, because each rests on something every worker shares:
a ``250`` follows the fsyncs and the index rows of its copies (``delivery.server.commit``), and every
check — a retry after a lost ``250``, visibility, sealed reviews — reads the shared index. How the
workers spread connections is ``delivery.server.balance``; how they tell each other of copies, ``delivery.server.gossip``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from workflow.core.config import Config
from workflow.core.errors import ConfigError, WorkflowError
from workflow.core.lifeline import die_with_parent
from workflow.delivery import address, local
from workflow.delivery.deliverer import Deliverer
from workflow.delivery.server.balance import Balancer
from workflow.delivery.server.gossip import Gossip
from workflow.delivery.server.listeners import reserve
from workflow.delivery.server.smtpd import Server, new_loop, secure_mail_root, stopped
from workflow.delivery.server.tally import Counters, Tally

log = logging.getLogger(__name__)

RESTARTS = 5  # a worker dying this often within RESTART_WINDOW seconds stops the server
RESTART_WINDOW = 30.0
START_TIMEOUT = 60.0
STOP_GRACE = 60.0  # then a worker still running is killed
SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}


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
        self.board = Counters(count, shared=True)
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


def _serve_worker(sup: Supervisor, row: int, ready: Ready, refresh: bool) -> None:
    async def main() -> None:
        balancer = Balancer(sup.board, row, [to for to, _ in sup.lanes])
        gossip = Gossip(balancer, sup.lanes[row][1], sup.deliverer.maildirs)
        server = Server(
            sup.config,
            sup.deliverer,
            host=sup.host,
            port=sup.port,
            tally=balancer,
            peers=gossip,
            others=gossip,
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
        balancer.serve = lambda sock: balancer.keep(loop.create_task(loop.connect_accepted_socket(factory, sock)))
        gossip.inbox.setblocking(False)
        for to, _ in sup.lanes:
            to.setblocking(False)
        loop.add_reader(gossip.inbox, gossip.hear)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        balancer.serving = os.getpid()
        ready.say("ready")
        await stop.wait()
        balancer.serving = 0
        loop.remove_reader(gossip.inbox)
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
