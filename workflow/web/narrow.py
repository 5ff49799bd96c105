"""Narrow: the board's filters (state, role, waiting on the viewer, event type, age — query
parameters of ``/board``), its natural order (``feat-2`` before ``feat-10``), card lines that say
the same collapsed into one with a count, and columns folded over ``FOLD`` cards (the rest one link
away: the column alone, in pages of ``PAGE``).

It only orders and picks among the cards ``pages.board`` made for the viewer: what a card shows,
and which of its mail a viewer may open, stays the board's and ``Sight``'s.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlencode

from workflow.app import App
from workflow.core import events
from workflow.mail.rows import Row
from workflow.policy.visibility import Sight
from workflow.web.pages import Board, CardView, links

PARAMS = ("state", "role", "mine", "event", "age", "page")  # the board's query parameters
FOLD = 25  # cards a column shows on the whole board; the rest behind "+ N more"
PAGE = 200  # cards a page of one column shows
DAY = 86400
AGES = {  # the age filter's choices: (label, newer than N days, or quiet for over N days)
    "1d": ("active today", 1, True),
    "7d": ("active this week", 7, True),
    "30d": ("active this month", 30, True),
    "over7d": ("quiet over a week", 7, False),
    "over30d": ("quiet over a month", 30, False),
}
_DIGITS = re.compile(r"(\d+)")


class Filters(NamedTuple):
    state: str = ""
    role: str = ""
    mine: bool = False
    event: str = ""
    age: str = ""
    page: int = 1

    @property
    def any(self) -> bool:
        """Whether a filter picks among the cards (a page number alone does not)."""
        return bool(self.state or self.role or self.mine or self.event or self.age)

    def query(self, **change: object) -> str:
        """The board's address with these filters, and ``change``'s (a page reset to the first)."""
        f = self._replace(page=1)._replace(**change)  # type: ignore[arg-type]
        q = {
            k: v
            for k, v in (
                ("state", f.state),
                ("role", f.role),
                ("mine", "1" if f.mine else ""),
                ("event", f.event),
                ("age", f.age),
                ("page", str(f.page) if f.page > 1 else ""),
            )
            if v
        }
        return "/board" + ("?" + urlencode(q) if q else "")


def filters(params: Mapping[str, str], states: Sequence[str]) -> Filters:
    """The filters a request asks for; a value that names nothing is no filter (never an error)."""
    state = params.get("state", "")
    event = params.get("event", "")
    age = params.get("age", "")
    try:
        page = max(1, min(10_000, int(params.get("page", "1"))))
    except ValueError:
        page = 1
    return Filters(
        state if state in states else "",
        params.get("role", "").strip()[:100],
        params.get("mine") == "1",
        event if event in events.NAMES else "",
        age if age in AGES else "",
        page,
    )


def natural(text: str) -> tuple[str | int, ...]:
    """A sort key that orders numbers by value: ``feat-2`` before ``feat-10``."""
    parts = _DIGITS.split(text.lower())  # text at even places, digits at odd: alike types compare
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def keeps(f: Filters, c: CardView, now: float) -> bool:
    """Whether card ``c`` passes the filters (its state's is the column's)."""
    if f.role and f.role not in c.roles:
        return False
    if f.mine and not c.mine:
        return False
    if f.event and f.event not in c.events:
        return False
    if f.age:
        _, days, newer = AGES[f.age]
        recent = c.active > now - days * DAY
        if recent != newer:
            return False
    return True


class Column(NamedTuple):
    state: str
    cards: tuple[CardView, ...]  # shown, in natural order
    total: int  # cards of the state that pass the filters
    more: int  # passed but not shown (folded, or on other pages)
    link: str  # where the rest are ("" when none are left)
    previous: str  # the page before (a column alone), else ""


def columns(b: Board, f: Filters, now: float | None = None) -> tuple[Column, ...]:
    """The board's columns, filtered and in natural order: each folded over ``FOLD`` cards on the
    whole board, or one state's in pages of ``PAGE`` when it is asked for alone."""
    now = time.time() if now is None else now
    picked: dict[str, list[CardView]] = {s: [] for s in b.states}
    for c in b.cards:
        if c.state in picked and (not f.state or c.state == f.state) and keeps(f, c, now):
            picked[c.state].append(c)
    out = []
    for state in b.states:
        if f.state and state != f.state:
            continue
        cs = sorted(picked[state], key=lambda c: (natural(c.path), c.path))
        if f.state:
            first = (f.page - 1) * PAGE
            shown = cs[first : first + PAGE]
            left = len(cs) - first - len(shown)
            link = f.query(page=f.page + 1) if left > 0 else ""
            previous = f.query(page=f.page - 1) if f.page > 1 else ""
            out.append(Column(state, tuple(shown), len(cs), max(0, left), link, previous))
        else:
            shown = cs[:FOLD]
            more = len(cs) - len(shown)
            out.append(Column(state, tuple(shown), len(cs), more, f.query(state=state) if more else "", ""))
    return tuple(out)


class Line(NamedTuple):
    """Card lines that say the same, as one: the event, its sender, how many, the newest first."""

    event: str
    sender: str
    rows: tuple[Row, ...]

    @property
    def times(self) -> int:
        return len(self.rows)


def collapsed(rows: Sequence[Row]) -> tuple[Line, ...]:
    """``rows`` grouped by (event, sender), in the order each group first appears; each group's
    rows newest first (its line links to the newest the viewer may read)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.event or "mail", r.sender), []).append(r)
    return tuple(Line(e, s, tuple(sorted(rs, key=lambda r: r.date, reverse=True))) for (e, s), rs in groups.items())


def page(app: App, sight: Sight, b: Board, params: Mapping[str, str]) -> dict[str, Any]:
    """What the board's template shows of ``b`` for these query parameters: its columns, the
    filter form's choices, the links of the cards shown (``pages.links``: those ``sight`` reads),
    and the way back of a decision made on it (this very board, filtered)."""
    f = filters(params, b.states)
    cols = columns(b, f)
    shown = b._replace(cards=tuple(c for col in cols for c in col.cards))
    return {
        "board": b,
        "columns": cols,
        "f": f,
        "roles": sorted({*app.roster.roles, *app.roster.panels}),
        "event_names": events.NAMES,
        "ages": AGES,
        "page_size": PAGE,
        "links": links(app, sight, shown),
        "here": f.query(),
    }
