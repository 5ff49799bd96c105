"""Quoted copies: a person's reply that quotes the artifact's copy, as an agent reads it.

A notification carries the artifact's text (and its diff) for people (``mail.artparts``), and a
person's mail client quotes it whole in the reply ("> # CSV export"). An agent reads the artifact
from the tree, never from a copy in the mail, and no more from a person's quote of one: in a
thread's transcript, each run of quoted lines that are the copy's own lines (blank quoted lines
between them included) is left out, and one line says so. Quoted lines of anything else (the
request's text, an earlier reply) and every line the person wrote stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
LEFT_OUT = "[{n} quoted line(s) of the artifact's copy left out: read the artifact from the tree]"


def copy_lines(texts: Iterable[str]) -> frozenset[str]:
    """The non-blank lines of the copies ``texts``, stripped, as a quote of them shows them."""
    return frozenset(s for t in texts for line in t.splitlines() if (s := line.strip()))


def without_copies(text: str, lines: frozenset[str]) -> str:
    """``text`` with each run of quoted copy lines (``lines``) replaced by one line saying so."""
    if not lines or ">" not in text:
        return text
    out: list[str] = []
    run: list[str] = []
    hits = 0

    def flush() -> None:
        nonlocal hits
        if hits:
            out.append(LEFT_OUT.format(n=hits))
        else:
            out.extend(run)
        run.clear()
        hits = 0

    for line in text.split("\n"):
        m = QUOTE.match(line)
        said = line[m.end() :].strip() if m else None
        if said is not None and said in lines:
            run.append(line)
            hits += 1
        elif said == "" and run:
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)
