"""Verdicts: what the first own line of a person's reply says — a decision, nearly one, or neither.

One reader for every place that asks: the server, when it types a person's plain mail at delivery
(``delivery.plain``), and agentd, when it applies the decision (``artifacts.decisions``). The
first line of text that is neither blank nor quoted (``>``) is read; its first word, stripped of
punctuation and case, is a decision when it is one of ``WORDS``. It is *nearly* one when it is a
typing slip away from one (``near``): at most 2 edits (insert, delete, replace, swap two
neighbours) from a word of 6 letters or more, at most 1 from a shorter one, and not an ordinary
word that merely looks like one (``NOT_DECISIONS``: "review", "reset", …). A near decision never
moves anything: the person is asked to confirm.
"""

from __future__ import annotations

from typing import NamedTuple

WORDS = {
    "approve": "approval",
    "approved": "approval",
    "lgtm": "approval",
    "reject": "rejection",
    "rejected": "rejection",
    "revise": "rejection",
}
# words a reply to a review-request may well begin with, a slip or two from a decision word
NOT_DECISIONS = frozenset(
    {"review", "reviewed", "reviews", "reviewing", "revised", "reset", "respect", "reflect", "rejoin", "approach"}
)
MAX_REASON = 4000  # characters of the reason carried into the notification
PUNCTUATION = ".,:;!?-—"


class Near(NamedTuple):
    """A first word that is nearly a decision word."""

    written: str  # the word as the person wrote it
    word: str  # the decision word it is nearly ("approved")
    event: str  # approval | rejection
    line: str  # the whole first line, as understood


def first_line(text: str) -> tuple[int, list[str]] | None:
    """(index, lines) of a reply's first own line: neither blank nor quoted."""
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith(">"):
            return i, lines
    return None


def verdict(text: str) -> tuple[str, str] | None:
    """(event, reason) from a reply's text: its first own line's first word, the rest the reason."""
    found = first_line(text)
    if found is None:
        return None
    i, lines = found
    head, _, rest = lines[i].strip().partition(" ")
    event = WORDS.get(head.strip(PUNCTUATION).lower())
    if event is None:
        return None
    reason = [rest.lstrip(" .,:;!-—").rstrip()]
    for more in lines[i + 1 :]:
        if (
            more.startswith(">")
            or more.rstrip() == "--"
            or (more.startswith("On ") and more.rstrip().endswith("wrote:"))
        ):
            break
        reason.append(more.rstrip())
    return event, printable("\n".join(reason))


def near(text: str) -> Near | None:
    """The decision a reply's first own line nearly says, when it says none exactly."""
    if verdict(text) is not None:
        return None
    found = first_line(text)
    if found is None:
        return None
    i, lines = found
    line = lines[i].strip()
    written = line.partition(" ")[0].strip(PUNCTUATION)
    word = written.lower()
    if len(word) < 3 or word in NOT_DECISIONS or not word.isalpha():
        return None
    best: tuple[int, str] | None = None
    for candidate in WORDS:
        d = distance(word, candidate)
        if d <= (2 if len(candidate) >= 6 else 1) and (best is None or d < best[0]):
            best = (d, candidate)
    if best is None:
        return None
    return Near(written, best[1], WORDS[best[1]], printable(line)[:200])


def distance(a: str, b: str) -> int:
    """Edits from ``a`` to ``b``: insert, delete, replace, or swap two neighbours (optimal
    string alignment), so "Apprvoed" is one slip from "approved", "LGMT" one from "LGTM"."""
    if abs(len(a) - len(b)) > 2:
        return 3  # further than any threshold asks
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def printable(text: str) -> str:
    """A reason as a commit message and a template may carry it: no NUL or other control characters."""
    return "".join(c for c in text.strip()[:MAX_REASON] if c in "\n\t" or c.isprintable())
