"""Pages: what each page shows a viewer — the board, an inbox, a thread, the runs — read through
the library the CLI reads through, never a second rule of its own.

What a viewer may see is ``roster.view(role)`` (their mailboxes and their own sent mail) for the
inbox and threads, ``board.visible`` for the board's mail (panel-internal mail only to members):
the same calls ``workflow inbox``, ``workflow thread`` and ``workflow status --as`` make. A
thread outside the view is not found (the server answers 404). A panel's status on the board is
its session's state and how many members have filed — never a verdict while it is sealed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from workflow.app import App
from workflow.artifacts.board import Card, Grouping, cards, visible
from workflow.artifacts.movers import last_moves
from workflow.core import events
from workflow.core.locate import Artifact, by_key, locate, scan
from workflow.core.senders import local_part, who
from workflow.mail.artparts import ARTIFACT, copies
from workflow.mail.body import Part, readable
from workflow.mail.inbox import InboxThread, group, read_row, select, thread_rows
from workflow.mail.rowcache import ArtifactRows
from workflow.mail.rows import Row
from workflow.panels.store import PanelStore, SessionState
from workflow.policy.visibility import Sight
from workflow.web import markdown

LATEST = 3  # events shown on a card
INBOX_THREADS = 200  # threads an inbox page shows at most


class Panel(NamedTuple):
    name: str
    state: str  # sealed | unsealing | discussion | decided
    filed: int  # assessments filed (a count: no verdict before it is unsealed)
    members: int
    decision: str | None  # only once decided


class CardView(NamedTuple):
    path: str
    name: str
    state: str
    flags: tuple[str, ...]
    latest: tuple[Row, ...]  # newest first
    holder: str  # who put it where it is: the role of its last move's commit (else the latest claim's sender)
    waiting: tuple[Row, ...]  # questions, clarification requests and blockers not answered yet
    review: Row | None  # a review-request the viewer's role received, while it is in proposed/
    panels: tuple[Panel, ...]
    # what the board's filters ask of a card (``narrow``): its mail's event types, the roles it
    # names (senders, recipients, the holder), its newest mail's date, and whether it waits on the viewer
    events: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    active: int = 0
    mine: bool = False


class Board(NamedTuple):
    states: tuple[str, ...]
    cards: tuple[CardView, ...]

    def column(self, state: str) -> list[CardView]:
        return [c for c in self.cards if c.state == state]


def answered(rows: Sequence[Row]) -> set[str]:
    """Message-IDs something in ``rows`` replies to."""
    return {p for r in rows for p in r.ancestry}


def board(app: App, role: str, rows: Sequence[Row] | None = None) -> Board:
    """The board as ``role`` may see it (``workflow status --as ROLE``), with what waits on whom;
    ``rows`` are ``with_artifacts()`` when the caller has them. ``Boards`` keeps one up to date."""
    if rows is None:
        with app.index() as index:
            index.refresh()  # what was delivered a moment ago (live.Watch refreshes too, on a change)
            rows = index.with_artifacts()
    shown = visible(rows, app.roster, role)
    boxes = set(app.roster.view(role)[0])
    panels = _panels(app)
    out = [_card(app, c, boxes, panels) for c in cards(app.config, shown)]
    return Board(tuple(app.config.states), tuple(out))


def _card(app: App, c: Card, boxes: set[str], panels: dict[tuple[str, str], list[Panel]]) -> CardView:
    replied = answered(c.mail)
    claim = next((r for r in reversed(c.mail) if r.state == c.artifact.state), None)
    holder = c.moved.role if c.moved is not None and c.moved.state == c.artifact.state else ""
    if not holder and claim is not None:  # no committed move (it was added there): who claimed it
        holder = who(claim.sender, app.config.domain)
    waiting = tuple(r for r in c.mail if r.event in events.WAITING and r.message_id not in replied)
    review = None
    if c.artifact.state == "proposed":
        done = decided(c.mail)
        asked = [
            r
            for r in c.mail
            if r.event == "review-request" and boxes.intersection(_boxes_of(app, r)) and r.message_id not in done
        ]
        review = asked[-1] if asked else None
    domain = app.config.domain
    named = {who(a, domain) for r in c.mail for a in (r.sender, *r.recipients)}
    mine = review is not None or any(boxes.intersection(_boxes_of(app, r)) for r in waiting)
    return CardView(
        c.artifact.path,
        c.artifact.name,
        c.artifact.state,
        tuple(c.flags),
        tuple(reversed(c.mail[-LATEST:])),
        holder,
        waiting,
        review,
        tuple(panels.get(c.artifact.key, ())),
        frozenset(r.event for r in c.mail if r.event),
        frozenset(named | ({holder} if holder else set())),
        max((r.date for r in c.mail), default=0),
        mine,
    )


class _Made:
    """One role's board and what it was made from, to make the next one from what changed."""

    def __init__(self, version: int, artifacts: list[Artifact], stamp: object, grouping: Grouping) -> None:
        self.version = version  # of the rows
        self.artifacts = artifacts
        self.stamp = stamp  # of the panels' store
        self.grouping = grouping
        self.panels: dict[tuple[str, str], list[Panel]] = {}
        self.cards: dict[Artifact, CardView] = {}
        self.board = Board((), ())


class Boards:
    """The board of each role, for a long-lived server: the rows kept up to date by
    ``ArtifactRows``, and a role's board made again from what changed since it was last made —
    on new rows only the cards of the artifacts they name (and of those that moved, or whose
    panels changed); anything else (a copy gone, an artifact added or removed) makes it whole.
    ``board`` is the reference: the same board, made from every row each time."""

    def __init__(self, app: App, kept: Callable[[], None] = lambda: None) -> None:
        self.app = app
        self.kept = kept  # called after a board is made whole (the server: ``server.keep_out_of_gc``)
        self.rows = ArtifactRows(app.config.index_path, app.index)
        self._made: dict[str, _Made] = {}
        self._lock = threading.Lock()  # event streams ask from several threads at once

    def board(self, role: str) -> Board:
        with self.app.index() as index:
            index.refresh()  # what was delivered a moment ago (live.Watch refreshes too, on a change)
        with self._lock:
            rows = self.rows.rows()
            artifacts = scan(self.app.config)
            panels = self.app.config.state.panels
            stamp = (_stat(panels), _stat(f"{panels}-wal"))
            made = self._made.get(role)
            if made is not None and (made.version, made.artifacts, made.stamp) == (self.rows.version, artifacts, stamp):
                return made.board
            if made is None or not self._update(made, role, artifacts, stamp):
                made = self._make(role, rows, artifacts, stamp)
                self._made[role] = made
            return made.board

    def _make(self, role: str, rows: list[Row], artifacts: list[Artifact], stamp: object) -> _Made:
        made = _Made(self.rows.version, artifacts, stamp, Grouping(self.app.config, artifacts, self.rows.order))
        made.grouping.add(visible(rows, self.app.roster, role), in_order=True)
        made.panels = _panels(self.app)
        self._redo(made, role, {a.key for a in artifacts}, artifacts)
        self.kept()
        return made

    def _update(self, made: _Made, role: str, artifacts: list[Artifact], stamp: object) -> bool:
        """Bring ``made`` up to date from what changed; False when it must be made whole."""
        added = self.rows.added_since(made.version)
        if added is None:
            return False
        before = made.artifacts
        touched: set[tuple[str, str]] = set()
        if artifacts != before:
            if not made.grouping.rescan(artifacts):
                return False
            old, new = by_key(before), by_key(artifacts)
            touched |= {k for k in new if new[k] != old.get(k)}
        if stamp != made.stamp or artifacts != before:
            panels = _panels(self.app)
            touched |= {k for k in {*panels, *made.panels} if panels.get(k) != made.panels.get(k)}
            made.panels = panels
        touched |= made.grouping.add(sorted(visible(added, self.app.roster, role), key=self.rows.order))
        for a in before:
            if a.key in touched:
                del made.cards[a]
        made.version, made.artifacts, made.stamp = self.rows.version, artifacts, stamp
        self._redo(made, role, touched, artifacts)
        return True

    def _redo(self, made: _Made, role: str, touched: set[tuple[str, str]], artifacts: list[Artifact]) -> None:
        """Make the cards of the ``touched`` identities again, and the board of every card."""
        boxes = set(self.app.roster.view(role)[0])
        groups = by_key(artifacts)
        mail = made.grouping.mail
        moves = last_moves(self.app.config) if touched else {}
        for a in artifacts:
            if a.key in touched:
                card = Card(a, tuple(groups[a.key]), tuple(mail.get(a.key, ())), moves.get(a.key))
                made.cards[a] = _card(self.app, card, boxes, made.panels)
        made.board = Board(tuple(self.app.config.states), tuple(made.cards[a] for a in artifacts))


def _stat(path: str | Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _boxes_of(app: App, r: Row) -> set[str]:
    """The mailboxes a message was delivered to (its recipients of the workflow's domain)."""
    return {b for a in r.recipients if (b := local_part(a, app.config.domain))} | {r.mailbox}


def _panels(app: App) -> dict[tuple[str, str], list[Panel]]:
    path = app.config.state.panels
    if not path.exists():
        return {}
    artifacts = scan(app.config)
    out: dict[tuple[str, str], list[Panel]] = {}
    with PanelStore(path) as store:
        for s in store.sessions():
            cfg = app.config.panel(s.panel)
            decided = s.state == SessionState.DECIDED
            filed = len({a.member for a in store.assessments(s.request, "assessment")})
            p = Panel(s.panel, s.state.value, filed, len(cfg.members) if cfg else 0, s.decision if decided else None)
            for a in locate(s.artifact, app.config, artifacts):
                out.setdefault(a.key, []).append(p)
    return out


# -- inbox and threads


class Inbox(NamedTuple):
    role: str
    threads: tuple[InboxThread, ...]
    total: int  # threads before the page's limit
    unread_only: bool


def inbox(app: App, role: str, unread_only: bool) -> Inbox:
    """``workflow inbox --as ROLE`` (``--all`` when not ``unread_only``), most urgent thread first."""
    boxes = Sight.of(app.roster, role).boxes
    with app.index() as index:
        index.refresh(boxes)
        rows = select(index, boxes, unread=unread_only, states=app.config.states)
    threads = group(rows)
    return Inbox(role, tuple(threads[:INBOX_THREADS]), len(threads), unread_only)


class Copied(NamedTuple):
    """An artifact's copy as the page shows it: Markdown made safe HTML, or a diff as text."""

    name: str
    html: str  # the artifact rendered ("" for a diff)
    diff: str


def copied(raw: bytes) -> tuple[Copied, ...]:
    """The copies a message carries, for the page (the diff once: its attachment is the same text)."""
    out = []
    for c in copies(raw):
        if c.mark == ARTIFACT:
            out.append(Copied(c.name, markdown.render(c.text), ""))
        elif not c.attachment:
            out.append(Copied(c.name, "", c.text))
    return tuple(out)


class Shown(NamedTuple):
    row: Row
    text: str
    parts: tuple[Part, ...]
    new: bool  # unread in the viewer's own mailbox
    review: bool  # a review-request the viewer received: the page offers the decision
    answerable: bool  # a question, clarification request or blocker the viewer received, not answered
    blocker: bool  # it reports a blocker (its answer may move the artifact back to doing/)
    copies: tuple[Copied, ...] = ()  # the artifact's copy and diff it carries (mail.artparts)
    outcome: str = ""  # a review-request decided: what was decided and by whom, in place of the buttons


def decided(rows: Sequence[Row]) -> dict[str, Row]:
    """Each review-request among ``rows``'s replies → the decision that answered it (the last)."""
    return {r.in_reply_to: r for r in rows if r.event in events.DECISIONS and r.in_reply_to}


def _outcome(d: Row, domain: str) -> str:
    return f"{d.event} by {who(d.sender, domain)}" + (f" ({d.state}/)" if d.state else "")


class Thread(NamedTuple):
    subject: str
    messages: tuple[Shown, ...]


def thread(app: App, role: str, message_id: str) -> Thread | None:
    """``workflow thread MID --as ROLE``: None when the message is not in the viewer's mail."""
    sight = Sight.of(app.roster, role)  # the judge of every page: what this role reads
    boxes, sent = sight.boxes, sight.sent
    with app.index() as index:
        index.refresh()  # the thread's other messages may be in any mailbox (the viewer's own sent mail)
        rows = thread_rows(index, boxes, message_id, sent)
    if not rows:
        return None
    replied = answered(rows)
    done = decided(rows)
    mine = set(boxes)
    shown = []
    for r in rows:
        raw = read_row(app.config.mail_root, r)
        body = readable(raw) if raw is not None else None
        received = r.mailbox in mine and local_part(r.sender, app.config.domain) not in mine
        shown.append(
            Shown(
                r,
                body.text if body is not None else "[this message is no longer in its mailbox]",
                body.parts if body is not None else (),
                received and not r.seen,
                received and r.event == "review-request" and r.message_id not in done,
                received and r.event in events.WAITING and r.message_id not in replied,
                events.get(r.event).enters == "blocked",
                copied(raw) if raw is not None else (),
                _outcome(done[r.message_id], app.config.domain) if r.message_id in done else "",
            )
        )
    return Thread(rows[0].subject, tuple(shown))


def message(app: App, role: str, message_id: str) -> tuple[Row, bytes] | None:
    """One message of the viewer's mail and its bytes (for an attachment), or None."""
    sight = Sight.of(app.roster, role)
    boxes, sent = sight.boxes, sight.sent
    with app.index() as index:
        rows = index.query(boxes, message_ids=[message_id], senders=sent)
    for r in rows:
        raw = read_row(app.config.mail_root, r)
        if raw is not None:
            return r, raw
    return None


class Search(NamedTuple):
    role: str
    text: str
    rows: tuple[Row, ...]


SEARCH_ROWS = 50  # messages a search shows at most


def search(app: App, sight: Sight, text: str) -> Search:
    """``workflow search TEXT --as ROLE``: the messages the viewer may read, newest first."""
    text = text.strip()[:200]
    if not text:
        return Search(sight.identity, "", ())
    with app.index() as index:
        index.refresh(sight.boxes)
        found = index.search(text, sight.boxes, SEARCH_ROWS * 4, sight.sent)
    rows = list({r.message_id or r.key: r for r in reversed(found)}.values())[::-1]  # one copy each
    return Search(sight.identity, text, tuple(rows[:SEARCH_ROWS]))


def links(app: App, sight: Sight, b: Board) -> set[str]:
    """The Message-IDs of the board's mail the viewer may read: the only ones it links to (a card
    shows the rest's kind, sender and age: an artifact's history is the team's)."""
    mids = {r.message_id for c in b.cards for r in (*c.latest, *c.waiting) if r.message_id}
    with app.index() as index:
        return sight.readable(index, mids)


def style(event: str | None) -> str:
    """A CSS class for an event type (its inbox priority)."""
    return f"p{events.get(event).priority}"
