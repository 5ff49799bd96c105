"""Gossip: what the ``workflow smtpd --workers`` workers tell each other of the copies they store.

Each round's copies are told to the other workers (a datagram to each one's inbox) once synced
and before they are moved into new/, and later that they are indexed (or undone) — the
committer's ``Peers``. A worker reads what it was told (``Gossip.stored``) before a check whenever
the others' tell counts moved since it last read its inbox, so a retry is recognised and a
reply's checks wait for the index, whichever worker stored the copies — the handler's ``Others``.
A worker that dies between telling and indexing is covered: its copies are known by place (a
retry compares the bytes there, or finds nothing and stores), and ``settle`` rescans their
mailboxes after ``SETTLE`` seconds. A single server has ``NoOthers``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Container, Mapping, Sequence
from typing import Literal, Protocol

from workflow.delivery.server.balance import Balancer
from workflow.delivery.server.commit import Copies
from workflow.delivery.server.tally import TELLS, WIDTH
from workflow.mail.index import Index
from workflow.mail.maildir import Entry, Maildirs

TELL_MAX = 200_000  # bytes in one datagram of copies told; a larger round is indexed before its 250
SETTLE = 2.0  # seconds to wait for another worker to index what it told of, before rescanning
FORGET = 600.0  # seconds after which a copy told of but never said indexed is forgotten


class Others(Protocol):
    """The copies other workers have stored and not yet indexed (``Gossip``): what they
    ``stored`` (as told so far), every Message-ID they have ``told`` of since this process
    started, and ``settle``, which returns once these Message-IDs are in the index."""

    @property
    def told(self) -> Container[str]: ...

    def stored(self) -> Mapping[str, Sequence[Entry]]: ...

    async def settle(self, message_ids: Sequence[str], index: Index) -> None: ...


class NoOthers:
    """A server alone: no other worker stores anything."""

    told: Container[str] = frozenset()

    def stored(self) -> Mapping[str, Sequence[Entry]]:
        return {}

    async def settle(self, message_ids: Sequence[str], index: Index) -> None:
        return None


class Either:
    """In one container or the other (what this process stored, what the others told of)."""

    def __init__(self, a: Container[str], b: Container[str]) -> None:
        self.a, self.b = a, b

    def __contains__(self, item: object) -> bool:
        return item in self.a or item in self.b


class Gossip:
    """One worker's side of the gossip over its inbox (``inbox``; the others' are ``lanes``), which
    also carries the connections passed to it (handed to ``balancer``)."""

    def __init__(self, balancer: Balancer, inbox: socket.socket, maildirs: Maildirs) -> None:
        self.balancer = balancer
        self.counters = balancer.board
        self.row = balancer.row
        self.lanes = balancer.lanes
        self.inbox = inbox
        self.maildirs = maildirs
        self.others: dict[str, list[Entry]] = {}
        self.told: set[str] = set()  # every Message-ID told of (stored) since this worker started
        self.heard: dict[str, float] = {}  # when each of ``others`` was told (oldest first)
        self._heard_up_to = -1  # the others' tell count when the inbox was last read to the end

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
        self.balancer.tells += 1  # after the sends: whoever reads the new count finds the datagrams queued
        return told

    def stored(self) -> Mapping[str, Sequence[Entry]]:
        if self._told_count() != self._heard_up_to:  # else nothing was told since the last hear
            self.hear()
        return self.others

    def _told_count(self) -> int:
        cells = self.counters.cells
        return sum(cells[r * WIDTH + TELLS] for r in range(self.counters.rows) if r != self.row)

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
                self.balancer.serve_passed(ancillary)
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
