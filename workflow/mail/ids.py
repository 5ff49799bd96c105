"""Ids: the Message-ID a user or agent names on a command line — checked without ``re``.

RFC 5322's form ``<left@right>``: one ``@`` with text either side, no angle bracket or white space
inside. A bare ``left@right`` gets its brackets. ``message.normalize_msgid`` refuses what this
does not accept; the short commands' fast path (``cli.fast``) uses it as it is.
"""

from __future__ import annotations


def given_msgid(value: str) -> str | None:
    """``value`` as a Message-ID in angle brackets, or None when it does not have the form."""
    v = value.strip()
    if not v.startswith("<"):
        v = f"<{v}>"
    inner = v[1:-1]
    if not v.endswith(">") or "<" in inner or ">" in inner or any(c.isspace() for c in inner):
        return None
    left, at, right = inner.partition("@")
    return v if at and left and right and "@" not in right else None
