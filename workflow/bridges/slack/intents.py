"""Intents: the Slack inbox agent's classification (docs/bridges.md) of a Slack request — Claude Haiku's JSON, or weighted keywords.

Nine intents: research, code_change, organize, question, reminder, todo, todo_check,
todo_complete, other. Claude returns {intent, summary, executionPrompt, reasoning,
clarifyQuestion?}; ``autonomyLevel`` is always forced to 2. Without an API key, or when the call
or its answer fails, three tiers of keyword rules score every intent — strong (8–15, action
verbs), medium (3–5, task words), weak (1–3, modifiers), English and Japanese — the
sums are compared and the highest wins (nothing matched: ``other``). A large-scope code_change
(新機能, アーキテクチャ, リプレース, "new feature", "architecture", "rewrite"…) gets a clarify question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from workflow.agents.backends.complete import CompletionError, complete
from workflow.bridges.slack.summarize import summarize

INTENTS = (
    "research",
    "code_change",
    "organize",
    "question",
    "reminder",
    "todo",
    "todo_check",
    "todo_complete",
    "other",
)
# (pattern, intent, weight); patterns are lower-cased substrings (Japanese needs no word boundaries).
RULES: tuple[tuple[str, str, int], ...] = (
    # strong: action verbs
    ("調べて", "research", 12),
    ("research", "research", 10),
    ("look up", "research", 10),
    ("investigate", "research", 10),
    ("作って", "code_change", 12),
    ("実装して", "code_change", 14),
    ("直して", "code_change", 12),
    ("fix", "code_change", 10),
    ("implement", "code_change", 12),
    ("refactor", "code_change", 10),
    ("add a feature", "code_change", 12),
    ("教えて", "question", 12),
    ("what is", "question", 9),
    ("how do", "question", 9),
    ("why does", "question", 9),
    ("整理して", "organize", 12),
    ("まとめて", "organize", 11),
    ("organize", "organize", 10),
    ("sort", "organize", 8),
    ("リマインド", "reminder", 13),
    ("remind me", "reminder", 13),
    ("予定を入れて", "reminder", 13),
    ("schedule", "reminder", 9),
    ("todo追加", "todo", 15),
    ("todoに追加", "todo", 15),
    ("add todo", "todo", 15),
    ("add to my todo", "todo", 15),
    ("todo:", "todo", 14),
    ("やること", "todo", 9),
    ("todo一覧", "todo_check", 15),
    ("todoリスト", "todo_check", 14),
    ("list todos", "todo_check", 15),
    ("show my todo", "todo_check", 15),
    ("my todos", "todo_check", 12),
    ("完了にして", "todo_complete", 15),
    ("todo完了", "todo_complete", 15),
    ("done with todo", "todo_complete", 15),
    ("complete todo", "todo_complete", 15),
    ("mark todo", "todo_complete", 14),
    # medium: task words
    ("リファクタ", "code_change", 5),
    ("バグ", "code_change", 4),
    ("bug", "code_change", 4),
    ("code", "code_change", 3),
    ("カレンダー", "reminder", 5),
    ("calendar", "reminder", 5),
    ("meeting", "reminder", 3),
    ("明日", "reminder", 3),
    ("一覧", "organize", 4),
    ("list", "organize", 3),
    ("分類", "organize", 4),
    ("?", "question", 3),
    ("？", "question", 3),
    ("とは", "question", 4),
    ("比較", "research", 4),
    ("compare", "research", 4),
    ("調査", "research", 5),
    # weak: modifiers
    ("最新", "research", 2),
    ("latest", "research", 2),
    ("情報", "research", 2),
    ("news", "research", 2),
    ("ファイル", "code_change", 1),
    ("file", "code_change", 1),
    ("整理", "organize", 2),
    ("なぜ", "question", 2),
)
LARGE_SCOPE = (
    "新機能",
    "アーキテクチャ",
    "リプレース",
    "全面",
    "new feature",
    "architecture",
    "rewrite",
    "replace the",
    "migrate",
    "redesign",
)


ACTIONS = tuple(pattern for pattern, _, weight in RULES if weight >= 3)  # what a summary keeps


class Intent(NamedTuple):
    intent: str
    summary: str
    execution_prompt: str
    reasoning: str
    clarify_question: str | None = None
    autonomy_level: int = 2
    method: str = "keywords"
    usage: Mapping[str, int] = MappingProxyType({})  # what asking the model cost (for the budgets)


def scores(text: str) -> dict[str, int]:
    t = text.lower()
    out = dict.fromkeys(INTENTS, 0)
    for pattern, intent, weight in RULES:
        if pattern in t:
            out[intent] += weight
    return out


def clarify_for(intent: str, text: str) -> str | None:
    t = text.lower()
    if intent == "code_change" and any(k in t for k in LARGE_SCOPE):
        return (
            "This looks like a large change. What exactly should change, what must stay as it is, and how will we "
            "know it is done? Reply in this thread and I will start."
        )
    return None


def by_keywords(text: str, why: str = "") -> Intent:
    s = scores(text)
    best = max(INTENTS, key=lambda i: (s[i], -INTENTS.index(i)))
    if s[best] == 0:
        best = "other"
    summary = summarize(text, ACTIONS)
    reasoning = "keyword scores " + ", ".join(f"{k}={v}" for k, v in s.items() if v) + (f" ({why})" if why else "")
    return Intent(best, summary, text.strip(), reasoning, clarify_for(best, text))


def classify(text: str, model: str = "claude-haiku-4-5-20251001", timeout: float = 20.0) -> Intent:
    """Claude (through the backend seam: its tokens are in ``usage``) when it answers well; the
    keyword scores otherwise."""
    ask = (
        "Classify this request for an autonomous assistant. Intents: " + ", ".join(INTENTS) + ". Answer with JSON "
        'only: {"intent", "summary", "executionPrompt", "reasoning", "clarifyQuestion" (null unless the request is '
        'too large or vague to start), "autonomyLevel"}.\n\nRequest:\n' + text[:4000]
    )
    try:
        answer = complete(ask, model, 400, timeout)
    except CompletionError as e:
        return by_keywords(text, str(e))
    try:
        m = re.search(r"\{.*\}", answer.text, re.S)
        data = json.loads(m.group(0)) if m else {}
    except ValueError as e:
        return by_keywords(text, f"Claude answered no JSON: {e}")._replace(usage=answer.usage)
    intent = str(data.get("intent", "")) if isinstance(data, dict) else ""
    if intent not in INTENTS:
        return by_keywords(text, f"Claude answered intent {intent!r}")._replace(usage=answer.usage)
    clarify = data.get("clarifyQuestion") or clarify_for(intent, text)
    return Intent(
        intent,
        str(data.get("summary") or summarize(text, ACTIONS)),
        str(data.get("executionPrompt") or text),
        str(data.get("reasoning") or ""),
        str(clarify) if clarify else None,
        2,
        "claude",
        answer.usage,
    )


FAILURE_PATTERNS = (
    r"失敗しました",
    r"できません",
    r"エラーが発生",
    r"認証.*エラー",
    r"No.*tokens? found",
    r"\bfailed\b",
    r"\bcannot\b",
    r"\berror occurred\b",
)


def failed(output: str) -> bool:
    """Failure detection: phrases in the last 500 characters."""
    tail = output[-500:]
    return any(re.search(p, tail, re.I) for p in FAILURE_PATTERNS)


def waiting(output: str) -> bool:
    """Pending input: or more question marks mean the agent asks for input."""
    return output.count("?") + output.count("？") >= 3
