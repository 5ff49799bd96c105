"""Classify: put an incoming mail under one of the four labels of docs/bridges.md.

``reply_needed`` (someone waits for an answer), ``review`` (something to read and judge),
``todo`` (an action to take), ``summarize`` (newsletters, notifications, long reads).
Claude answers with JSON through the backend seam (``complete``: its tokens are counted); without an API key, or when the call or its
answer fails, a keyword score decides (weighted phrases per label; the highest total wins, ties
and zero scores go to ``summarize``). Each result says which method decided and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from workflow.agents.backends.complete import CompletionError, complete

LABELS = ("reply_needed", "review", "todo", "summarize")
KEYWORDS: dict[str, tuple[tuple[str, int], ...]] = {
    "todo": (
        ("todo", 6),
        ("to do", 5),
        ("action required", 8),
        ("action item", 7),
        ("please do", 5),
        ("deadline", 4),
        ("by friday", 4),
        ("by monday", 4),
        ("by tomorrow", 4),
        ("remind me", 5),
        ("task", 3),
        ("don't forget", 5),
        ("need you to", 5),
        ("make sure", 3),
        ("follow up", 3),
    ),
    "reply_needed": (
        ("?", 2),
        ("can you", 4),
        ("could you", 4),
        ("would you", 4),
        ("let me know", 5),
        ("please reply", 7),
        ("your thoughts", 5),
        ("what do you think", 6),
        ("are you available", 6),
        ("rsvp", 6),
        ("get back to me", 6),
        ("question", 3),
    ),
    "review": (
        ("review", 6),
        ("feedback", 5),
        ("draft", 4),
        ("proposal", 4),
        ("pull request", 7),
        ("attached", 3),
        ("take a look", 5),
        ("approve", 4),
        ("sign off", 5),
        ("comments on", 4),
        ("spec", 3),
    ),
    "summarize": (
        ("newsletter", 8),
        ("unsubscribe", 8),
        ("digest", 6),
        ("weekly update", 6),
        ("notification", 4),
        ("no-reply", 6),
        ("noreply", 6),
        ("announcement", 4),
        ("release notes", 5),
        ("fyi", 4),
    ),
}


class Classification(NamedTuple):
    label: str
    method: str  # "claude" | "keywords"
    reason: str
    scores: dict[str, int] = {}
    usage: Mapping[str, int] = MappingProxyType({})  # what asking the model cost (for the budgets)


def keyword_scores(subject: str, body: str, sender: str = "") -> dict[str, int]:
    text = f"{subject}\n{body}\n{sender}".lower()
    out = {}
    for label, rules in KEYWORDS.items():
        total = 0
        for phrase, weight in rules:
            n = (
                text.count(phrase)
                if phrase == "?"
                else len(re.findall(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text))
            )
            total += weight * min(n, 3)
        out[label] = total
    return out


def by_keywords(subject: str, body: str, sender: str = "", why: str = "") -> Classification:
    scores = keyword_scores(subject, body, sender)
    best = max(LABELS, key=lambda lb: (scores[lb], lb == "summarize"))
    if scores[best] == 0:
        best = "summarize"
    reason = f"keyword scores {', '.join(f'{k}={v}' for k, v in scores.items())}" + (f" ({why})" if why else "")
    return Classification(best, "keywords", reason, scores)


def classify(
    subject: str, body: str, sender: str = "", model: str = "claude-haiku-4-5", timeout: float = 30.0
) -> Classification:
    """Claude (through the backend seam: its tokens are in ``usage``) when it answers well; the
    keyword score otherwise."""
    prompt = (
        "Classify this email into exactly one label: reply_needed (the sender waits for an answer), review "
        "(something to read and judge), todo (an action for the recipient), summarize (newsletters, notifications, "
        'long reads). Answer with JSON only: {"label": "...", "reason": "..."}.\n\n'
        f"From: {sender}\nSubject: {subject}\n\n{body[:6000]}"
    )
    try:
        answer = complete(prompt, model, 200, timeout)
    except CompletionError as e:
        return by_keywords(subject, body, sender, str(e))
    try:
        m = re.search(r"\{.*\}", answer.text, re.S)
        data = json.loads(m.group(0)) if m else {}
        label = str(data.get("label", "")).strip() if isinstance(data, dict) else ""
    except ValueError:
        label = ""
    if label not in LABELS:
        why = f"Claude answered {answer.text[:80]!r}, not one of the labels"
        return by_keywords(subject, body, sender, why)._replace(usage=answer.usage)
    return Classification(label, "claude", str(data.get("reason", ""))[:300], usage=answer.usage)
