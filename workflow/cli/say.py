"""Say: what a short command on the fast path prints, and how it reads its parsed values.

``write`` prints to stdout and stops quietly when the reader has gone (``workflow inbox | head``);
``text_or_none`` reads an optional text value of ``cli.fast.parse``'s result.
"""

from __future__ import annotations

import sys


def text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `workflow inbox | head`: the reader has all it wanted
        pass
    return 0
