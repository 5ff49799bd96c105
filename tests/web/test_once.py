"""The owner's one-time login links (``workflow.web.once.Links``): good once, for their minutes only,
and a bounded number open — on a clock the test moves, not by waiting five minutes."""

from __future__ import annotations

from workflow.web.once import MAX_OPEN, Links


def test_a_link_is_good_once_and_for_its_minutes_only() -> None:
    now = [1000.0]
    links = Links(seconds=300, clock=lambda: now[0])
    first, second, third = links.mint(), links.mint(), links.mint()
    assert len({first, second, third}) == 3 and len(first) >= 40
    assert links.redeem(first) and not links.redeem(first)  # once
    now[0] += 299
    assert links.redeem(second)
    now[0] += 2
    assert not links.redeem(third)  # expired: 301 s after it was minted
    assert not links.redeem("") and not links.redeem("x" * 10_000) and not links.redeem(first + "x")


def test_minting_many_forgets_the_oldest() -> None:
    links = Links()
    oldest = links.mint()
    rest = [links.mint() for _ in range(MAX_OPEN)]
    assert not links.redeem(oldest)
    assert all(links.redeem(t) for t in rest)
