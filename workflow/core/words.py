"""Words: counted nouns in what people read — "1 artifact", "2 artifacts", never "1 artifacts"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural``, else noun + "s")."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
