"""Verdicts: the first own line of a reply is a decision, nearly one (a slip away), or neither."""

from __future__ import annotations

import pytest

from workflow.mail.verdicts import distance, near, verdict


@pytest.mark.parametrize(
    ("text", "nearly"),
    [
        ("Apprvoed, nice work\n", ("Apprvoed", "approved", "approval")),
        ("LGMT\n", ("LGMT", "lgtm", "approval")),
        ("> quoted\n\nAprove.\n", ("Aprove", "approve", "approval")),
        ("Rejectd: too vague\n", ("Rejectd", "reject", "rejection")),
        ("Revse please\n", ("Revse", "revise", "rejection")),
    ],
)
def test_a_slip_from_a_decision_word_is_nearly_a_decision(text: str, nearly: tuple[str, str, str]) -> None:
    assert verdict(text) is None
    found = near(text)
    assert found is not None and (found.written, found.word, found.event) == nearly


@pytest.mark.parametrize(
    "text",
    [
        "Review attached\n",
        "Reset the counter?\n",
        "can we get CSV export done this week?\n",
        "Approach B\n",
        "ok\n",
        "",
    ],
)
def test_ordinary_words_are_not_near_decisions(text: str) -> None:
    assert near(text) is None


def test_a_decision_in_another_case_is_a_decision_not_a_near_one() -> None:
    assert verdict("REJECT. too vague\n") == ("rejection", "too vague")
    assert near("REJECT. too vague\n") is None


def test_a_swap_of_neighbours_is_one_edit() -> None:
    assert distance("lgmt", "lgtm") == 1 and distance("apprvoed", "approved") == 1 and distance("abc", "abcdef") == 3
