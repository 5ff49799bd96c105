"""Summarize: a Slack request's one-line summary without a model — the action phrase, no filler.

``summarizeText`` (docs/bridges.md): greetings and sign-offs are dropped (お疲れ様です, よろしくお願いします,
"Hi team", "Thanks!"), the sentence with the action (one of the classifier's keywords: 調べて, "fix",
"research"…) is kept, and inside it the filler (すみません, ちょっと, "could you please", "when you
have a moment", "sorry to bother you", "um", a "but" left at the front) and the request's polite ending (〜てもらえますか → 〜て) are stripped. Cut at
``limit`` characters on a word boundary. Text with nothing left falls back to its start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SENTENCE = re.compile(r"(?<=[。！？\n])|(?<=[.!?])\s+")
GREETING = re.compile(
    r"^\s*(お疲れ様です|おつかれさまです|お世話になっております|こんにちは|おはようございます|よろしく(お願い(します|いたします))?|"
    r"ありがとう(ございます)?|hi|hello|hey|good (morning|afternoon|evening)|thanks|thank you|cheers|"
    r"hope you (had|are)[^.!?]*)[\s,.!！。、~ー]*(team|all|everyone|there)?[\s,.!！。、]*$",
    re.I,
)
FILLER_JA = (
    "すみませんが",
    "すみません",
    "ちょっと",
    "えーと",
    "えっと",
    "あの",
    "なんか",
    "できれば",
    "もしよければ",
    "お手数ですが",
    "お忙しいところ",
    "恐縮ですが",
)
POLITE_END_JA = re.compile(
    r"(て|で)(もらえ(ます|ません)か|いただけ(ます|ません)か|ください|くれ(る|ない)|ほしい(です)?|欲しい(です)?)"
    r"(\?|？)?$|(を)?お願い(します|いたします)?$"
)
FILLER_EN = re.compile(
    r"\b(i was wondering if you could|i was hoping (you could|to)|do you think you could|would you mind|"
    r"would it be possible to|is it possible to|could you( please)?|can you( please)?|would you( please)?|"
    r"sorry (to (bother|trouble|interrupt|ping) you|for the (noise|ping|trouble))|sorry|"
    r"if (it'?s )?not too much trouble|if you (don'?t|do not) mind|"
    r"please|kindly|just|when you have a (moment|minute|chance)|if (possible|you can)|for me|asap)\b[,]?",
    re.I,
)
# what is left at the front once the filler went: a greeting, a hesitation, a conjunction
LEAD_EN = re.compile(
    r"^((hi|hello|hey)( team| all| everyone| there)?|um+|uh+|erm?|hmm+|well|so|ok(ay)?|oh|but|and|anyway)"
    r"(?![\w'])[,!.\s]*",
    re.I,
)


def _sentences(text: str) -> list[str]:
    return [s.strip(" 、,") for s in SENTENCE.split(re.sub(r"[ \t]+", " ", text)) if s and s.strip(" 、,")]


def _lead(s: str) -> str:
    """``s`` without the greetings, hesitations and conjunctions it starts with."""
    while (cut := LEAD_EN.sub("", s, count=1)) != s:
        s = cut.lstrip(" ,")
    return s


def _clean(sentence: str) -> str:
    s = _lead(sentence)
    for word in FILLER_JA:
        s = s.replace(word, "")
    s = FILLER_EN.sub("", s)
    s = _lead(re.sub(r"\s+", " ", s).strip(" 、,。.!！?？"))
    s = POLITE_END_JA.sub(lambda m: m.group(1) or "", s).strip(" 、,。")
    s = re.sub(r"^[、,\s]+", "", s)
    return s[:1].upper() + s[1:] if s[:1].isascii() else s


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,、") + "…"


def summarize(text: str, actions: Sequence[str] = (), limit: int = 80) -> str:
    """The action phrase of a request, filler stripped, at most ``limit`` characters; ``actions``
    are the lower-case words that mark the sentence to keep (the classifier's keywords)."""
    sentences = [s for s in _sentences(text) if not GREETING.match(s)]
    low = [s.lower() for s in sentences]
    chosen = next((s for s, lo in zip(sentences, low, strict=True) if any(a in lo for a in actions)), None)
    if chosen is None and sentences:
        chosen = sentences[0]
    out = _clean(chosen) if chosen else ""
    return _cut(out or re.sub(r"\s+", " ", text.strip()), limit)
