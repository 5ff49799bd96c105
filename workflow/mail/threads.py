"""Threads: JWZ threading (RFC 5256 REFERENCES without subject merging) over Message-IDs.

Parents come from References and In-Reply-To only, as notmuch does: a new review cycle is a new
thread (docs/message-format.md), so two threads about the same artifact are never merged by subject.
Handles replies that arrive before their parents (placeholder containers), missing parents,
References cycles (a link that would close a loop is skipped) and duplicate Message-IDs (the
first copy wins).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence


class Container:
    """A node: a message we have, or a placeholder for one only referenced."""

    __slots__ = ("id", "present", "parent", "children")

    def __init__(self, id: str, present: bool = False) -> None:
        self.id = id
        self.present = present
        self.parent: Container | None = None
        self.children: list[Container] = []


def _is_ancestor(node: Container, candidate: Container) -> bool:
    """True when ``candidate`` is ``node`` or one of its ancestors."""
    p: Container | None = node
    while p is not None:
        if p is candidate:
            return True
        p = p.parent
    return False


def _link(parent: Container, child: Container) -> None:
    if child.parent is parent or _is_ancestor(parent, child):
        return
    if child.parent is not None:
        child.parent.children.remove(child)
    child.parent = parent
    parent.children.append(child)


class Threads:
    """Every thread of a set of messages; build once, query many times."""

    def __init__(self, links: Iterable[tuple[str, str | None, str | Sequence[str]]]) -> None:
        # Building 100k linked containers makes the cyclic GC scan them over and over; nothing
        # here is garbage until the whole table is, so pause it while building.
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._build(links)
        finally:
            if enabled:
                gc.enable()

    def _build(self, links: Iterable[tuple[str, str | None, str | Sequence[str]]]) -> None:
        table: dict[str, Container] = {}
        get = table.get
        for mid, irt, refs in links:
            c = get(mid)
            if c is None:
                c = table[mid] = Container(mid, True)
            elif c.present:
                continue  # a duplicate Message-ID: the first copy wins
            else:
                c.present = True
            chain = list(refs.split() if isinstance(refs, str) else refs)
            if irt and (not chain or chain[-1] != irt):
                chain.append(irt)
            prev: Container | None = None
            for ref in chain:
                if ref == mid:
                    continue
                rc = get(ref)
                if rc is None:
                    rc = table[ref] = Container(ref)
                if prev is not None and rc.parent is None:
                    _link(prev, rc)
                prev = rc
            if prev is not None:
                _link(prev, c)  # the nearest parent wins, unless it would close a loop
        self.table = table

    def roots(self) -> list[Container]:
        """Thread roots, each holding at least one message we have (placeholders pruned)."""
        out = []
        for c in self.table.values():
            if c.parent is None and _has_message(c):
                out.append(c)
        return out

    def count(self) -> int:
        return len(self.roots())

    def root_of(self, mid: str) -> Container | None:
        c = self.table.get(mid)
        if c is None:
            return None
        while c.parent is not None:
            c = c.parent
        return c

    def members(self, mid: str) -> list[str]:
        """Every present Message-ID in the thread holding ``mid``, depth first."""
        root = self.root_of(mid)
        if root is None:
            return []
        out: list[str] = []
        stack = [root]
        while stack:
            c = stack.pop()
            if c.present:
                out.append(c.id)
            stack.extend(reversed(c.children))
        return out


def _has_message(c: Container) -> bool:
    stack = [c]
    while stack:
        n = stack.pop()
        if n.present:
            return True
        stack.extend(n.children)
    return False
