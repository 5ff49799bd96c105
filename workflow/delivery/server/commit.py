"""Commit: group commit for the SMTP server — concurrent deliveries made durable together.

Each checked plan's copies are written at once (``submit``): each with no name in its new/ where
the system allows it (``mail.unnamed``: its fsync then writes no directory), else in tmp/. At the
end of the event loop's turn, one round takes every plan written so far and, for the whole batch:
starts writing every file, fsyncs each (with a journal the first fsync commits it for all of them;
without one each finds its data already on its way), links each into new/ (or renames it from
tmp/), fsyncs each touched new/ directory *once* and, beside them, each linked file again (its
link count is in its own inode); then the waiting transactions are woken, and only then answer
``250``. While more of this process's transactions are under way than plans are written or
syncing (another client is between MAIL and the end of its DATA), a round waits for them,
``GATHER`` at most: the syncs, not the checks, are most of a message's cost, and one round for
two clients costs what one round for one costs. Nothing is acknowledged before its own file and
directory are synced.

Where Linux AIO is available (``aio.Fsyncs``), a round submits each phase's fsyncs together and
the event loop goes on serving while the disk works; it takes the round up again when they are
reaped, and the next round may start meanwhile. The kernel runs them side by side, and a virtual
disk serves several syncs in about the time of one. Elsewhere the round blocks the loop in one
fsync after another (``asynchronous=False`` asks for that): a worker process has one thread, so
no interpreter lock is handed between threads (that cost more than the syncs), and the
connections that arrive meanwhile are served by the other workers and batched into the next
round. Index rows follow in larger batches, written through the server's own index connection
(the index is a cache the Maildirs can rebuild); until then the copies are in ``unindexed``,
which delivery's checks read beside the index. Their full-text rows, which no check reads and
which cost as much as the rest of the row, are written once the process has been quiet for
``TEXT_QUIET`` (a search writes any still missing first). Other processes storing into the same
Maildirs (the workers of ``workflow smtpd --workers``) are told of each round's copies once
their files are synced and before they are moved into new/ (``Peers``), so their checks see
every copy that can be in a new/, even if this process dies the next moment; when they cannot be
told, the round is indexed before it is acknowledged. A plan that fails (disk full, a directory
in the way) is undone alone — no copy left in any new/ or tmp/ — and its transaction answers
``451``; the rest of the batch is unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Generator, Sequence
from typing import Literal, NamedTuple, Protocol

from workflow.core.errors import MailIndexError
from workflow.delivery.deliverer import Deliverer, Plan
from workflow.delivery.server.aio import Fsyncs
from workflow.mail.index import Index
from workflow.mail.maildir import DirFsync, Entry, Writeback
from workflow.mail.unnamed import Unnamed

log = logging.getLogger(__name__)

Result = list[Entry] | BaseException
INDEX_BATCH = 256
INDEX_DELAY = 0.05
GATHER = 0.002  # the longest a round waits for the transactions under way to write their plans
TEXT_QUIET = 0.5  # full-text rows are written once this process has committed nothing for this long
TEXT_STEP = 100  # ... this many at a time (a few ms of the loop), serving whatever came in between


class Copy(NamedTuple):
    """A copy written and not yet in new/: unnamed in its new/ (``tmp`` empty), or in tmp/."""

    mailbox: str
    box: str  # the mailbox's directory
    tmp: str  # its path in tmp/, or "" when it has no name (``mail.unnamed``)
    name: str  # its name in new/ to be
    fd: int  # open until its round ends (a copy with no name is linked, then synced again, through it)


Written = list[Copy]


class Job(NamedTuple):
    """A plan written to tmp/, waiting for its round."""

    plan: Plan
    files: Written
    fut: asyncio.Future[list[Entry]]  # resolved once its copies are durable in new/


# the commit pipeline: yields fds to sync, is sent their outcomes, returns (results, all told)
Pipeline = Generator[list[int], list["OSError | None"], tuple[list[Result], bool]]
Copies = Sequence[tuple[str, Sequence[Entry]]]  # (Message-ID, its stored copies)


class Peers(Protocol):
    """The other processes delivering into the same Maildirs: ``tell`` them which copies this one
    is storing ("stored": synced, about to be moved into new/; False if they could not all be
    told) or has "settled" (indexed, or undone: they need not remember them any more)."""

    def tell(self, what: Literal["stored", "settled"], copies: Copies) -> bool: ...


class Alone:
    """No other process delivers here."""

    def tell(self, what: Literal["stored", "settled"], copies: Copies) -> bool:
        return True


class Committer:
    """Owns the writing side of delivery for the server: Maildir writes and index rows. Every
    method is called in the event loop."""

    def __init__(
        self,
        deliverer: Deliverer,
        peers: Peers | None = None,
        under_way: Callable[[], int] | None = None,
        *,
        asynchronous: bool = True,
        unnamed: bool = True,
    ) -> None:
        self.deliverer = deliverer
        # fsync without blocking the loop where the system allows it (``aio``), from ``start``
        self.asynchronous = asynchronous
        self.aio: Fsyncs | None = None
        self._rounds: set[asyncio.Task[None]] = set()  # rounds syncing (asynchronous fsyncs)
        self._syncing = 0  # ... and the plans they hold
        self.peers = peers or Alone()
        # How many of this process's mail transactions are under way: from MAIL to their answer.
        self.under_way = under_way or (lambda: 0)
        self.maildirs = deliverer.maildirs
        self.dirs = DirFsync()
        self.writeback = Writeback()
        # copies written with no name in their new/ where the system allows it (``mail.unnamed``)
        self.unnamed = Unnamed() if unnamed else None
        self.index: Index | None = None
        # Stored and acknowledged, not yet indexed: the index is a cache, written in larger
        # batches than the durable writes (every INDEX_BATCH copies, or after INDEX_DELAY quiet).
        # Delivery's retry check reads this map too, so nothing is stored twice meanwhile; a
        # crash loses only index rows, which the next start's refresh recreates from the Maildirs.
        self._backlog: list[tuple[Plan, list[Entry]]] = []
        self.unindexed: dict[str, list[Entry]] = {}
        self.known: set[str] = set()  # Message-IDs stored (loaded from the index at start)
        self._written: list[Job] = []  # in tmp/, waiting for the round at the end of this turn
        self._round: asyncio.Handle | None = None  # at the end of this turn: commit, or wait
        self._gather: asyncio.TimerHandle | None = None  # the round waiting for more plans
        self._first = 0.0  # when the oldest plan in _written was written (the loop's clock)
        self._later: asyncio.TimerHandle | None = None
        self._last_round = 0.0  # when the last round committed (the loop's clock)
        self._filler: asyncio.TimerHandle | None = None  # writing the full-text rows left for later

    def start(self, index: Index) -> None:
        """Write index rows through ``index`` (the server's own connection: one warm cache), and
        in a quiet moment the full-text rows left for later (by this server or an earlier one)."""
        self.index = index
        loop = asyncio.get_running_loop()
        if self.asynchronous and self.aio is None:
            self.aio = Fsyncs.open(loop)
        self._filler = loop.call_later(TEXT_QUIET, self._fill)

    async def drain(self) -> None:
        """Wait for the rounds under way to end (their transactions are answered)."""
        if self._written:
            self._commit()  # no more transactions are coming: no reason to gather
        if self._rounds:
            await asyncio.wait(set(self._rounds), timeout=10)

    def stop(self) -> None:
        """Undo what was written but not yet synced, and index what was; ``index`` stays open."""
        for handle in (self._round, self._gather, self._filler):
            if handle is not None:
                handle.cancel()
        self._round = self._gather = self._filler = None
        for plan, files, fut in self._written:
            self._undo(plan, files)
            if not fut.done():
                fut.set_exception(ConnectionAbortedError("the server is stopping"))
        self._written = []
        if self.aio is not None:
            self.aio.close()  # waits for the syncs submitted; a round not finished stays unanswered
            self.aio = None
        self.indexed()
        self.dirs.close()

    def submit(self, plan: Plan) -> asyncio.Future[list[Entry]]:
        """Write a checked plan's copies to tmp/; the future resolves (or fails) once they are
        durable in new/."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Entry]] = loop.create_future()
        md = self.maildirs
        files: Written = []
        try:
            for mb in plan.mailboxes:
                files.append(self._write(mb, plan.raw))
        except BaseException as e:
            self._undo(plan, files)
            fut.set_exception(md.failure(e))
            return fut
        if not self._written:
            self._first = loop.time()
        self._written.append(Job(plan, files, fut))
        if self._round is None:
            self._round = loop.call_soon(self._end_of_turn)
        return fut

    def indexed(self) -> None:
        """Record the durable-but-unindexed copies in one transaction: every copy acknowledged
        before the call is then in the index."""
        if self._later is not None:
            self._later.cancel()
            self._later = None
        if not self._backlog or self.index is None:
            return
        backlog, self._backlog = self._backlog, []
        # logs and carries on if the index fails; the full-text rows follow (``_fill``)
        self.deliverer.record_many(self.index, backlog, text=False)
        for plan, _ in backlog:
            self.unindexed.pop(plan.message_id, None)
        self._tell("settled", [(plan.message_id, entries) for plan, entries in backlog])

    # ---------------------------------------------------------------- rounds

    def _end_of_turn(self) -> None:
        """Commit now, or wait (``GATHER`` at most) while other transactions may soon write."""
        self._round = None
        if not self._written:
            return
        loop = asyncio.get_running_loop()
        left = self._first + GATHER - loop.time()
        if left > 0 and self.under_way() > len(self._written) + self._syncing:
            if self._gather is None:
                self._gather = loop.call_later(left, self._commit)
            return
        self._commit()

    @property
    def gathering(self) -> int:
        """Plans written to tmp/ whose round has not started."""
        return len(self._written)

    def _commit(self) -> None:
        """One round: sync every plan written so far, record it, wake its transactions. With
        asynchronous fsyncs the round goes on while the loop serves others, and the next round
        may start before it ends."""
        if self._gather is not None:
            self._gather.cancel()
            self._gather = None
        batch, self._written = self._written, []
        if not batch:
            return
        if self.aio is None:
            self._finish(batch, *self._sync(batch))
            return
        task = asyncio.get_running_loop().create_task(self._commit_async(batch, self.aio))
        self._rounds.add(task)
        task.add_done_callback(self._rounds.discard)

    async def _commit_async(self, batch: list[Job], aio: Fsyncs) -> None:
        self._syncing += len(batch)
        try:
            results, all_told = await self._sync_async(batch, aio)
        except BaseException as e:  # a bug, or the loop closing: no transaction is left waiting
            for job in batch:  # (the round closed their files)
                self.maildirs.undo(job.plan.mailboxes, [], _in_tmp(job.files))
            self._finish(batch, [e for _ in batch], True)
            raise
        finally:
            self._syncing -= len(batch)
        self._finish(batch, results, all_told)

    def _finish(self, batch: list[Job], results: list[Result], all_told: bool) -> None:
        """Record a round's copies, index them now or soon, and wake its transactions."""
        undone: list[tuple[str, list[Entry]]] = []
        for (plan, *_), result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                undone.append((plan.message_id, []))
            elif result:
                self._backlog.append((plan, result))
                self.unindexed.setdefault(plan.message_id, []).extend(result)
                self.known.add(plan.message_id)
        if undone:
            self._tell("settled", undone)
        if not all_told or len(self._backlog) >= INDEX_BATCH:
            self.indexed()  # when the others could not be told, they find the copies in the index
        elif self._backlog and self._later is None:
            self._later = asyncio.get_running_loop().call_later(INDEX_DELAY, self.indexed)
        _settle([(job.fut, r) for job, r in zip(batch, results, strict=True)])
        loop = asyncio.get_running_loop()
        self._last_round = loop.time()
        if self._filler is None:
            self._filler = loop.call_later(TEXT_QUIET, self._fill)

    def _fill(self) -> None:
        """Write the full-text rows left for later, ``TEXT_STEP`` at a time, once nothing has been
        committed for ``TEXT_QUIET`` and no transaction is under way; a busy server waits."""
        self._filler = None
        if self.index is None:
            return
        loop = asyncio.get_running_loop()
        wait = self._last_round + TEXT_QUIET - loop.time()
        if wait > 0 or self._written or self._rounds or self._backlog or self.under_way():
            self._filler = loop.call_later(max(wait, GATHER), self._fill)
            return
        try:
            written = self.index.fill_text(TEXT_STEP)
        except MailIndexError as e:
            log.warning("full-text rows not written: %s", e)  # a search writes them, or reindex
            return
        if written == TEXT_STEP:  # more to write: first serve what came meanwhile
            self._filler = loop.call_later(0, self._fill)

    def _tell(self, what: Literal["stored", "settled"], copies: Copies) -> bool:
        """Tell the peers; a peer that fails in a way no one planned for is one not told (the
        round is then indexed before its ``250``), never a failed delivery."""
        try:
            return self.peers.tell(what, copies)
        except Exception:
            log.exception("could not tell the other workers what was %s; indexing first", what)
            return False

    def _undo(self, plan: Plan, files: Written) -> None:
        """Take back a plan whose round has not started: close its files, remove those in tmp/."""
        for copy in files:
            try:
                os.close(copy.fd)
            except OSError:
                pass
        self.maildirs.undo(plan.mailboxes, [], _in_tmp(files))

    def _pipeline(self, batch: Sequence[Job]) -> Pipeline:
        """The one commit pipeline, whatever does the syncing: yields each phase's fds (every
        file; then each touched new/ directory and each linked file) to the sync step and is sent
        their outcomes; returns each plan's copies, or its error, and False if the peers could not
        all be told. Between the phases each copy is given its name in new/ (``_name``)."""
        results: list[Result] = [[] for _ in batch]
        try:
            staged = self._files_synced(batch, (yield self._start_writing(batch)), results)
            moved, dirs, all_told = self._move(batch, staged, results)
            fds: list[int] = []
            opened: list[OSError | None] = []
            for d in dirs:
                try:
                    fds.append(self.dirs.fd(d))
                    opened.append(None)
                except OSError as e:
                    opened.append(e)
            self.dirs.syncs += len(fds)
            fds += [c.fd for _, linked in moved.values() for c in linked]
            synced = iter((yield fds))
            outcome = [e if e is not None else next(synced) for e in opened] + list(synced)
            self._dirs_synced(batch, moved, dirs, outcome, results)
        finally:
            _close(batch)  # the kernel holds what it needs of a submitted fsync's file
        return results, all_told

    def _sync(self, batch: Sequence[Job]) -> tuple[list[Result], bool]:
        """The pipeline with a blocking sync step: one ``os.fsync`` after another."""
        steps = self._pipeline(batch)
        try:
            fds = next(steps)
            while True:
                fds = steps.send([_fsync(fd) for fd in fds])
        except StopIteration as done:
            outcome: tuple[list[Result], bool] = done.value
            return outcome
        finally:
            steps.close()

    async def _sync_async(self, batch: Sequence[Job], aio: Fsyncs) -> tuple[list[Result], bool]:
        """The pipeline with the loop free while the disk works: each phase's fsyncs submitted
        together (``aio``), their completions reaped by the loop."""
        steps = self._pipeline(batch)
        try:
            fds = next(steps)
            while True:
                fds = steps.send(await aio.fsync(fds))
        except StopIteration as done:
            outcome: tuple[list[Result], bool] = done.value
            return outcome
        finally:
            steps.close()

    def _start_writing(self, batch: Sequence[Job]) -> list[int]:
        """Every file's fd, its write-out started when there is more than one
        (maildir.Writeback says why)."""
        fds = [c.fd for job in batch for c in job.files]
        if len(fds) > 1:
            for fd in fds:
                self.writeback.start(fd)
        return fds

    def _files_synced(
        self, batch: Sequence[Job], outcome: Sequence[OSError | None], results: list[Result]
    ) -> dict[int, Written]:
        """A plan any of whose files failed to sync is undone. Returns the plans whose files are
        all durable."""
        md = self.maildirs
        staged: dict[int, Written] = {}
        k = 0
        for i, (plan, files, *_) in enumerate(batch):
            error: BaseException | None = None
            for _ in files:
                error = error or outcome[k]
                k += 1
            if error is not None:
                md.undo(plan.mailboxes, [], _in_tmp(files))
                results[i] = md.failure(error)
            else:
                staged[i] = files
        return staged

    def _move(
        self, batch: Sequence[Job], staged: dict[int, Written], results: list[Result]
    ) -> tuple[dict[int, tuple[list[tuple[str, str]], Written]], list[str], bool]:
        """Tell the peers where each copy will be, then move each into new/: rename it from tmp/,
        or link it (a file with no name). Returns, for each plan moved, its (mailbox, new path)
        pairs and its linked files (to be synced again); the new/ directories to sync; and
        whether all the peers were told."""
        md = self.maildirs
        told = [
            (batch[i].plan.message_id, [Entry(c.mailbox, c.name, "new", "", f"{c.box}/new/{c.name}") for c in files])
            for i, files in staged.items()
        ]
        all_told = not told or self._tell("stored", told)
        moved: dict[int, tuple[list[tuple[str, str]], Written]] = {}
        for i, files in staged.items():
            done: list[tuple[str, str]] = []
            try:
                for c in files:
                    target = self._name(c)
                    done.append((c.mailbox, target))
                moved[i] = (done, [c for c in files if not c.tmp])
            except BaseException as e:
                md.undo(batch[i].plan.mailboxes, [t for _, t in done], _in_tmp(files))
                results[i] = md.failure(e)
        dirs = sorted({os.path.dirname(t) for targets, _ in moved.values() for _, t in targets})
        return moved, dirs, all_told

    def _dirs_synced(
        self,
        batch: Sequence[Job],
        moved: dict[int, tuple[list[tuple[str, str]], Written]],
        dirs: Sequence[str],
        outcome: Sequence[OSError | None],
        results: list[Result],
    ) -> None:
        """Each moved plan's copies, or, when one of its new/ directories or of its linked files
        failed to sync, its error (and none of its copies left in new/). ``outcome`` is each
        directory's, then each linked file's, in the order of ``moved``."""
        failed = {d: e for d, e in zip(dirs, outcome[: len(dirs)], strict=True) if e is not None}
        after = iter(outcome[len(dirs) :])
        for i, (targets, linked) in moved.items():
            bad = [failed[os.path.dirname(t)] for _, t in targets if os.path.dirname(t) in failed]
            bad += [e for e in (next(after) for _ in linked) if e is not None]
            if bad:
                self.maildirs.undo(batch[i].plan.mailboxes, [t for _, t in targets], [])
                results[i] = self.maildirs.failure(bad[0])
            else:
                results[i] = [Entry(mb, os.path.basename(t), "new", "", t) for mb, t in targets]

    def _write(self, mailbox: str, raw: bytes) -> Copy:
        """The first half of the naming step: write a copy with no name in its new/ where the
        system allows it (``mail.unnamed``), else in tmp/."""
        md = self.maildirs
        box = md.ensure(mailbox)
        fd = self.unnamed.write(box, raw) if self.unnamed is not None else None
        if fd is not None:
            return Copy(mailbox, box, "", md.new_name(), fd)
        tmp, name, fd = md.stage(box, raw)
        return Copy(mailbox, box, tmp, name, fd)

    def _name(self, copy: Copy) -> str:
        """The second half: give a synced copy its name in new/ (rename from tmp/, or link the
        file with no name); its path there."""
        if copy.tmp:
            return self.maildirs.move_new(copy.tmp, copy.name)
        assert self.unnamed is not None  # it wrote the copy
        return self.unnamed.link(copy.fd, copy.box, copy.name)


def _in_tmp(files: Written) -> list[str]:
    """The paths in tmp/ of the copies that have one (a copy with no name has none to remove)."""
    return [c.tmp for c in files if c.tmp]


def _close(batch: Sequence[Job]) -> None:
    """Close every file of a round, once, whatever became of it."""
    for job in batch:
        for c in job.files:
            try:
                os.close(c.fd)
            except OSError:
                pass


def _fsync(fd: int) -> OSError | None:
    try:
        os.fsync(fd)
    except OSError as e:
        return e
    return None


def _settle(items: Sequence[tuple[asyncio.Future[list[Entry]], Result]]) -> None:
    for fut, result in items:
        if fut.done():
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)
