"""The group commit on its own: rounds, their wait for the transactions under way, and a peer that
breaks never fails a delivery — with the fsyncs the loop waits in and with asynchronous ones."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import pytest

from helpers.project import Project
from helpers.smtp import message
from workflow.core.errors import DeliveryError
from workflow.delivery.deliverer import Plan
from workflow.delivery.server.commit import GATHER, Committer, Peers
from workflow.mail.index import Index
from workflow.mail.maildir import Entry
from workflow.mail.message import to_lf

SYNCS = pytest.mark.parametrize("asynchronous", [True, False], ids=["aio", "blocking"])
# copies written with no name in new/ (where the system allows it, as this machine kind does), or in tmp/
NAMING = pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed", "in-tmp"])


@contextmanager
def committing(
    project: Project,
    peers: Peers | None = None,
    under_way: int = 0,
    asynchronous: bool = True,
    unnamed: bool = True,
) -> Iterator[tuple[Committer, Index]]:
    """A committer on the project's Maildirs and index (``under_way``: the transactions it is told
    are under way), stopped at the end."""
    deliverer = project.app.deliverer
    with deliverer.open_index() as index:
        committer = Committer(deliverer, peers, lambda: under_way, asynchronous=asynchronous, unnamed=unnamed)
        committer.start(index)
        assert (committer.aio is not None) == asynchronous  # this machine kind has Linux AIO
        assert (committer.unnamed is not None and committer.unnamed.available) == unnamed  # ... and O_TMPFILE
        try:
            yield committer, index
        finally:
            committer.stop()


class BreaksOnce:
    """Peers whose first "stored" tell fails with an error no one planned for."""

    def __init__(self) -> None:
        self.broke = False

    def tell(self, what: Literal["stored", "settled"], copies: Sequence[tuple[str, Sequence[Entry]]]) -> bool:
        if what == "stored" and not self.broke:
            self.broke = True
            raise RuntimeError("a peer broke")
        return True


@SYNCS
def test_a_peer_that_breaks_is_a_peer_not_told_and_the_round_is_indexed_before_its_250(
    project: Project, asynchronous: bool
) -> None:
    deliverer = project.app.deliverer
    first, second = message(mid="<commit.1@workflow.local>"), message(mid="<commit.2@workflow.local>")

    async def main() -> tuple[list[Entry], bool, list[Entry]]:
        with committing(project, BreaksOnce(), asynchronous=asynchronous) as (committer, index):
            plan = deliverer.prepare(first, ["spec-reviewer@workflow.local"], index)
            stored = await asyncio.wait_for(committer.submit(plan), 5)
            indexed_at_250 = bool(index.query(message_ids=["<commit.1@workflow.local>"]))
            plan = deliverer.prepare(second, ["spec-reviewer@workflow.local"], index)
            after = await asyncio.wait_for(committer.submit(plan), 5)
        return stored, indexed_at_250, after

    stored, indexed_at_250, after = asyncio.run(main())
    assert len(stored) == 1 and indexed_at_250  # the others could not be told: they find it in the index
    assert len(after) == 1
    assert sorted(p.read_bytes() for p in project.new_files("spec-reviewer")) == sorted([to_lf(first), to_lf(second)])


@SYNCS
@NAMING
def test_plans_submitted_in_one_turn_are_committed_in_one_round(
    project: Project, asynchronous: bool, unnamed: bool
) -> None:
    n = 3

    async def main() -> tuple[int, int, list[Entry], list[bytes]]:
        with committing(project, asynchronous=asynchronous, unnamed=unnamed) as (committer, index):
            plans = _plans(project, index, n, "round")
            before = committer.dirs.syncs
            stored = await asyncio.gather(*(committer.submit(p) for p in plans))
            synced = committer.dirs.syncs - before
            return synced, len(project.new_files("spec-reviewer")), sum(stored, []), [p.raw for p in plans]

    dir_syncs, stored, entries, sent = asyncio.run(main())
    assert stored == n and dir_syncs == 1  # one fsync of new/ served the whole batch
    assert sorted(Path(e.file).read_bytes() for e in entries) == sorted(sent)
    assert list((project.mail / "spec-reviewer" / "tmp").iterdir()) == []


@SYNCS
@NAMING
def test_a_copy_that_cannot_be_moved_into_new_undoes_its_plan_alone(
    project: Project, asynchronous: bool, unnamed: bool
) -> None:
    """A plan for two mailboxes, one of whose new/ is gone by the time its round moves the copies
    there: no copy of it stays anywhere, and the other plan of the round is stored."""
    deliverer = project.app.deliverer
    both = message(mid="<undo.1@workflow.local>", to=("spec-reviewer", "implementer"))
    alone = message(mid="<undo.2@workflow.local>")

    async def main() -> tuple[BaseException | None, list[Entry]]:
        with committing(project, asynchronous=asynchronous, unnamed=unnamed) as (committer, index):
            first = deliverer.prepare(both, ["spec-reviewer@workflow.local", "implementer@workflow.local"], index)
            second = deliverer.prepare(alone, ["spec-reviewer@workflow.local"], index)
            one, two = committer.submit(first), committer.submit(second)
            (project.mail / "implementer" / "new").rmdir()  # before the round, at the end of this turn
            failed, stored = await asyncio.gather(one, two, return_exceptions=True)
        assert isinstance(stored, list)
        return (failed if isinstance(failed, BaseException) else None), stored

    failed, stored = asyncio.run(main())
    assert isinstance(failed, DeliveryError) and "implementer" in str(failed)
    assert [p.read_bytes() for p in project.new_files("spec-reviewer")] == [to_lf(alone)]
    assert [e.mailbox for e in stored] == ["spec-reviewer"]
    for box in ("spec-reviewer", "implementer"):
        assert list((project.mail / box / "tmp").iterdir()) == []


def _plans(project: Project, index: Index, n: int, tag: str) -> list[Plan]:
    deliverer = project.app.deliverer
    return [
        deliverer.prepare(message(mid=f"<{tag}.{i}@workflow.local>"), ["spec-reviewer@workflow.local"], index)
        for i in range(n)
    ]


@SYNCS
def test_a_round_waits_briefly_for_the_transactions_under_way(project: Project, asynchronous: bool) -> None:
    """Two clients of one process, one a moment behind the other: one round (one fsync of new/)
    makes both durable, instead of one round each."""

    async def main() -> list[int]:
        """The rounds each pair took, for the pairs whose second came while the first still
        waited (a machine that held this process off the CPU past ``GATHER`` makes a pair that
        says nothing: the round had rightly gone; the pair is tried again)."""
        rounds: list[int] = []
        with committing(project, under_way=2, asynchronous=asynchronous) as (committer, index):
            for attempt in range(20):
                first, second = _plans(project, index, 2, f"gather{attempt}")
                before = committer.dirs.syncs
                one = committer.submit(first)
                await asyncio.sleep(GATHER / 4)  # the second client's DATA ends a little later
                waited = committer.gathering == 1  # the first one's round has not started yet
                two = committer.submit(second)
                await asyncio.wait_for(asyncio.gather(one, two), 5)
                if waited:
                    rounds.append(committer.dirs.syncs - before)
                if len(rounds) == 3:
                    break
        return rounds

    rounds = asyncio.run(main())
    assert rounds and all(n == 1 for n in rounds), rounds
    assert len(project.new_files("spec-reviewer")) % 2 == 0


@SYNCS
def test_a_lone_transaction_is_not_kept_waiting(project: Project, asynchronous: bool) -> None:
    async def main() -> tuple[int, bool]:
        with committing(project, under_way=1, asynchronous=asynchronous) as (committer, index):
            (plan,) = _plans(project, index, 1, "lone")
            fut = committer.submit(plan)
            await asyncio.sleep(0)  # the end of this turn: its round has started (blocking: run)
            started, done = committer.gathering, fut.done()
            await asyncio.wait_for(fut, 5)
            return started, done

    waiting, done = asyncio.run(main())
    assert waiting == 0
    assert done or asynchronous  # an asynchronous round ends when the disk is done


@SYNCS
def test_a_round_waits_no_longer_than_its_bound(project: Project, asynchronous: bool) -> None:
    """Transactions under way that never reach DATA (a slow client, a refusal) hold a round for
    GATHER at most."""

    async def main() -> float:
        with committing(project, under_way=5, asynchronous=asynchronous) as (committer, index):
            (plan,) = _plans(project, index, 1, "bound")
            loop = asyncio.get_running_loop()
            started = loop.time()
            await asyncio.wait_for(committer.submit(plan), 5)
            return loop.time() - started

    waited = asyncio.run(main())
    assert GATHER * 0.9 <= waited < 0.5, waited
    assert len(project.new_files("spec-reviewer")) == 1
