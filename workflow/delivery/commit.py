"""Commit: group commit for the SMTP server — concurrent deliveries made durable together.

One thread takes every plan queued since its last round and, for the whole batch: writes each
copy to tmp/, fsyncs each file (the first fsync commits the journal for all of them), renames
each into new/, fsyncs each touched new/ directory *once*, then wakes the waiting transactions,
which only then answer ``250``. Nothing is acknowledged before its own file and directory are
synced. Index rows follow in larger batches (the index is a cache the Maildirs can rebuild);
until then the copies are in ``unindexed``, which delivery's checks read beside the index. Other
processes storing into the same Maildirs (the workers of ``workflow smtpd --workers``) are told
of each round's copies once their files are synced and before they are moved into new/ (``Peers``),
so their checks see every copy that can be in a new/, even if this process dies the next moment;
when they cannot be told, the round is indexed before it is acknowledged. A plan that fails (disk full, a
directory in the way) is undone alone — no copy left in any new/ — and its transaction answers
``451``; the rest of the batch is unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections.abc import Sequence
from typing import Literal, Protocol

from workflow.delivery.deliverer import Deliverer, Plan
from workflow.mail.index import Index
from workflow.mail.maildir import DirFsync, Entry

log = logging.getLogger(__name__)

Result = list[Entry] | BaseException
INDEX_BATCH = 256
INDEX_DELAY = 0.05
Job = tuple[Plan | None, asyncio.Future[list[Entry]], asyncio.AbstractEventLoop]  # no plan: index now
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
    """Owns the writing side of delivery for the server: Maildir writes and the index."""

    def __init__(self, deliverer: Deliverer, peers: Peers | None = None) -> None:
        self.deliverer = deliverer
        self.peers = peers or Alone()
        self.maildirs = deliverer.maildirs
        self.queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="committer", daemon=True)
        self.dirs = DirFsync()
        # Stored and acknowledged, not yet indexed: the index is a cache, written in larger
        # batches than the durable writes (every INDEX_BATCH copies, or after INDEX_DELAY quiet).
        # Delivery's retry check reads this map too, so nothing is stored twice meanwhile; a
        # crash loses only index rows, which the next start's refresh recreates from the Maildirs.
        self._backlog: list[tuple[Plan, list[Entry]]] = []
        self.unindexed: dict[str, list[Entry]] = {}
        self.known: set[str] = set()  # Message-IDs stored (loaded from the index at start)
        self._untold = False  # a round the peers could not be told of: indexed before it is acknowledged

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Finish what is queued, then stop."""
        self.queue.put(None)
        self.thread.join(timeout=60)

    def submit(self, plan: Plan) -> asyncio.Future[list[Entry]]:
        """Queue a checked plan; the future resolves (or fails) once it is durable and indexed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Entry]] = loop.create_future()
        self.queue.put((plan, fut, loop))
        return fut

    async def indexed(self) -> None:
        """Return once every copy committed before the call is in the index."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Entry]] = loop.create_future()
        self.queue.put((None, fut, loop))
        await fut

    def _run(self) -> None:
        index = self.deliverer.open_index()
        try:
            while True:
                try:
                    job = self.queue.get(timeout=INDEX_DELAY if self._backlog else None)
                except queue.Empty:
                    self._index(index)  # quiet for a moment: catch the index up
                    continue
                if job is None:
                    return
                batch = [job]
                stop = False
                while True:
                    try:
                        nxt = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    batch.append(nxt)
                flushes = [j for j in batch if j[0] is None]
                batch = [j for j in batch if j[0] is not None]
                results = self._commit([p for p, _, _ in batch if p is not None]) if batch else []
                undone: list[tuple[str, list[Entry]]] = []
                for (plan, _, _), result in zip(batch, results, strict=True):
                    if plan is None:
                        continue
                    if isinstance(result, BaseException):
                        undone.append((plan.message_id, []))
                    elif result:
                        self._backlog.append((plan, result))
                        self.unindexed.setdefault(plan.message_id, []).extend(result)
                        self.known.add(plan.message_id)
                if undone:
                    self.peers.tell("settled", undone)
                if self._untold:
                    self._index(index)  # the others could not be told: they find the copies in the index
                    self._untold = False
                _wake(batch, results)
                if len(self._backlog) >= INDEX_BATCH or flushes:
                    self._index(index)
                _wake(flushes, [[] for _ in flushes])
                if stop:
                    return
        finally:
            self._index(index)
            index.close()
            self.dirs.close()

    def _index(self, index: Index) -> None:
        """Record the durable-but-unindexed copies in one transaction."""
        if not self._backlog:
            return
        backlog, self._backlog = self._backlog, []
        self.deliverer.record_many(index, backlog)  # logs and carries on if the index fails
        for plan, _ in backlog:
            self.unindexed.pop(plan.message_id, None)
        self.peers.tell("settled", [(plan.message_id, entries) for plan, entries in backlog])

    def _commit(self, plans: Sequence[Plan]) -> list[Result]:
        md = self.maildirs
        results: list[Result] = [[] for _ in plans]
        # 1. write every copy of every plan to tmp/ (not yet synced)
        written: dict[int, list[tuple[str, str, str, int]]] = {}
        for i, plan in enumerate(plans):
            files: list[tuple[str, str, str, int]] = []
            try:
                for mb in plan.mailboxes:
                    tmp, name, fd = md.stage(str(md.ensure(mb)), plan.raw)
                    files.append((mb, tmp, name, fd))
                written[i] = files
            except BaseException as e:
                for _, _, _, fd in files:
                    os.close(fd)
                md.undo(plan.mailboxes, [], [t for _, t, _, _ in files])
                results[i] = md.failure(e)
        # 2. fsync each file (the first commits the journal for the whole batch), then close it
        staged: dict[int, list[tuple[str, str, str]]] = {}
        for i, files in written.items():
            error: BaseException | None = None
            for _, _, _, fd in files:
                try:
                    if error is None:
                        os.fsync(fd)
                except OSError as e:
                    error = e
                finally:
                    os.close(fd)
            if error is not None:
                md.undo(plans[i].mailboxes, [], [t for _, t, _, _ in files])
                results[i] = md.failure(error)
            else:
                staged[i] = [(mb, tmp, name) for mb, tmp, name, _ in files]
        # 3. tell the peers where each copy will be, 4. rename into new/, 5. fsync each touched
        # new/ once, 6. settle each plan
        told = [
            (
                plans[i].message_id,
                [
                    Entry(mb, name, "new", "", os.path.dirname(os.path.dirname(tmp)) + "/new/" + name)
                    for mb, tmp, name in synced
                ],
            )
            for i, synced in staged.items()
        ]
        if told and not self.peers.tell("stored", told):
            self._untold = True
        moved: dict[int, list[tuple[str, str]]] = {}
        for i, synced in staged.items():
            done: list[tuple[str, str]] = []
            try:
                for mb, tmp, name in synced:
                    done.append((mb, md.move_new(tmp, name)))
                moved[i] = done
            except BaseException as e:
                md.undo(plans[i].mailboxes, [t for _, t in done], [t for _, t, _ in synced])
                results[i] = md.failure(e)
        failed: dict[str, BaseException] = {}
        for d in sorted({os.path.dirname(t) for targets in moved.values() for _, t in targets}):
            try:
                self.dirs.fsync(d)
            except OSError as e:
                failed[d] = e
        for i, targets in moved.items():
            bad = [failed[os.path.dirname(t)] for _, t in targets if os.path.dirname(t) in failed]
            if bad:
                md.undo(plans[i].mailboxes, [t for _, t in targets], [])
                results[i] = md.failure(bad[0])
            else:
                results[i] = [Entry(mb, os.path.basename(t), "new", "", t) for mb, t in targets]
        return results


def _wake(batch: Sequence[Job], results: Sequence[Result]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[list[Entry]], Result]]] = {}
    for (_, fut, loop), result in zip(batch, results, strict=True):
        by_loop.setdefault(loop, []).append((fut, result))
    for loop, items in by_loop.items():
        loop.call_soon_threadsafe(_settle, items)


def _settle(items: Sequence[tuple[asyncio.Future[list[Entry]], Result]]) -> None:
    for fut, result in items:
        if fut.done():
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)
