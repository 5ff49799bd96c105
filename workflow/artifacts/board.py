"""Board: every artifact by state with the last workflow mail about it, flagging claims that disagree.

Mail is matched to an artifact by identity (root and name), so a message that named
``specs/proposed/x.md`` or ``specs/*/x.md`` is about x wherever x is now. A card is flagged when
the latest message carrying an ``X-Workflow-State`` claims another state than the folder — unless
a role's committed move put it there after that message (``artifacts.movers``: the commit is the
truth over older mail) — or when the artifact sits in two state folders.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

from workflow.artifacts.movers import Moved, Movers, last_moves, settled
from workflow.core.config import Config
from workflow.core.locate import Artifact, Pool, by_key, has_glob, matches, scan, split_ref
from workflow.core.senders import who
from workflow.core.words import count
from workflow.mail.inbox import unique
from workflow.mail.rows import Row
from workflow.policy.roster import Roster
from workflow.policy.visibility import Sight


class Card(NamedTuple):
    artifact: Artifact
    copies: tuple[Artifact, ...]  # every folder it is in (more than one is a problem)
    mail: tuple[Row, ...]  # messages about it, oldest first, one row per Message-ID
    moved: Moved | None = None  # its last committed move (who put it where it is, and when)

    @property
    def last(self) -> Row | None:
        return self.mail[-1] if self.mail else None

    @property
    def claim(self) -> Row | None:
        """The latest message that claims a state."""
        return next((r for r in reversed(self.mail) if r.state), None)

    @property
    def flags(self) -> list[str]:
        out = []
        claim = self.claim
        if (
            claim is not None
            and claim.state != self.artifact.state
            and not settled(self.moved, self.artifact.state, claim.date)
        ):
            out.append(f"mail claims {claim.state}")
        if len(self.copies) > 1:
            out.append("also in " + ", ".join(f"{a.state}/" for a in self.copies if a != self.artifact))
        return out


def visible(rows: Sequence[Row], roster: Roster, identity: str | None = None) -> list[Row]:
    """The rows the board may show: panel-internal mail (a row with a ``space``) only to ``identity``
    when it is a member (or the panel) that received it — as for ``workflow thread`` and ``search``."""
    if identity is None:
        return [r for r in rows if not r.space]  # internal mail stays with its members
    sight = Sight.of(roster, identity)
    return [r for r in rows if sight.on_board(r)]


def mail_by_key(config: Config, rows: Sequence[Row], artifacts: Sequence[Artifact]) -> dict[tuple[str, str], list[Row]]:
    """Messages grouped by the artifact identities their X-Artifacts name."""
    pool = Pool(config, artifacts)
    cache: dict[tuple[str, ...], list[list[Row]]] = {}  # the lists a row with these refs goes to
    out: dict[tuple[str, str], list[Row]] = {}
    for r in unique(rows):
        lists = cache.get(r.artifacts)
        if lists is None:
            keys = sorted({a.key for ref in r.artifacts for a in pool.locate(ref)})
            lists = cache[r.artifacts] = [out.setdefault(k, []) for k in keys]
        for mail in lists:
            mail.append(r)
    return out


class Grouping:
    """``mail_by_key`` kept between calls: the first copy of each message (``unique``) and, by
    identity, the first copies naming it — in the order ``order`` gives the rows (their list's).
    ``add`` takes rows in as they come and says which identities' mail changed; ``rescan`` takes a
    new scan with the same identities (an artifact moved). A caller filters the rows (``visible``)."""

    def __init__(self, config: Config, artifacts: Sequence[Artifact], order: Callable[[Row], Any]) -> None:
        self.config = config
        self.order = order
        self.pool = Pool(config, artifacts)
        self.identities = {a.key for a in artifacts}
        self.first: dict[str, Row] = {}  # one copy per message: the first in ``order``
        self.mail: dict[tuple[str, str], list[Row]] = {}
        self._keys: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
        self._by_state = False  # a ref picks states by a glob: where artifacts are decides what it names

    def keys(self, r: Row) -> tuple[tuple[str, str], ...]:
        """The identities a row's X-Artifacts name."""
        got = self._keys.get(r.artifacts)
        if got is None:
            got = self._keys[r.artifacts] = tuple(sorted({a.key for ref in r.artifacts for a in self.pool.locate(ref)}))
            splits = (split_ref(ref, self.config) for ref in r.artifacts)
            self._by_state = self._by_state or any(s is not None and self._picks(s.state) for s in splits)
        return got

    def _picks(self, state: str) -> bool:
        """Whether a ref's state part names some states and not others (``specs/*/x`` names all)."""
        return has_glob(state) and not all(matches(s, state) for s in self.config.states)

    def add(self, rows: Iterable[Row], in_order: bool = False) -> set[tuple[str, str]]:
        """Take ``rows`` in (``in_order``: each after every row taken so far); the identities whose
        mail changed."""
        touched: set[tuple[str, str]] = set()
        order = self.order
        for r in rows:
            u = r.message_id or f"{r.mailbox}/{r.key}"
            old = self.first.get(u)
            if old is not None:
                if in_order or order(old) < order(r):
                    continue  # a later copy of a message already shown
                for k in self.keys(old):
                    self.mail[k].remove(old)
                    touched.add(k)
            self.first[u] = r
            for k in self.keys(r):
                mail = self.mail.setdefault(k, [])
                if in_order:
                    mail.append(r)
                else:
                    bisect.insort(mail, r, key=order)
                touched.add(k)
        return touched

    def rescan(self, artifacts: Sequence[Artifact]) -> bool:
        """Take a new scan; False when what rows name may differ (identities came or went, or a
        ref picks states by a glob): group again from the start."""
        if self._by_state or {a.key for a in artifacts} != self.identities:
            return False
        self.pool = Pool(self.config, artifacts)
        return True


def cards(config: Config, rows: Sequence[Row], only: Artifact | None = None, moves: Movers | None = None) -> list[Card]:
    """One card per artifact in the working tree (per copy when it is in two folders), each with
    its last committed move (``moves``, else read from git)."""
    artifacts = scan(config)
    moves = last_moves(config) if moves is None else moves
    mail = mail_by_key(config, rows, artifacts)
    groups = by_key(artifacts)
    out = []
    for a in artifacts:
        if only is not None and a.key != only.key:
            continue
        rows_of = tuple(sorted(mail.get(a.key, []), key=attrgetter("date", "key")))
        out.append(Card(a, tuple(groups[a.key]), rows_of, moves.get(a.key)))
    return out


def age(ts: int, now: float) -> str:
    if not ts:
        return "-"
    s = max(0, int(now - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{s}s ago"


def render(config: Config, board: Sequence[Card], now: float | None = None) -> str:
    """A table per state, every state shown (an empty one says so)."""
    now = time.time() if now is None else now
    lines: list[str] = []
    width = max([len(c.artifact.path) for c in board] + [8])
    for state in config.states:
        here = [c for c in board if c.artifact.state == state]
        lines.append(f"{state}/ ({len(here)})")
        if not here:
            lines.append("  -")
        for c in here:
            last = c.last
            said = (
                f"{last.event or 'mail'} from {who(last.sender, config.domain)}, {age(last.date, now)}"
                if last
                else "no mail yet"
            )
            flag = "  ! " + "; ".join(c.flags) if c.flags else ""
            moved = f"  (moved by {c.moved.role}, {age(c.moved.time, now)})" if c.moved else ""
            lines.append(f"  {c.artifact.path:<{width}}  {said}{moved}{flag}")
        lines.append("")
    flagged = sum(1 for c in board if c.flags)
    lines.append(
        f"{count(len(board), 'artifact')}, {flagged} flagged" + (" (workflow doctor explains)" if flagged else "")
    )
    return "\n".join(lines)


def history(card: Card, domain: str, now: float | None = None) -> str:
    now = time.time() if now is None else now
    out = [f"{card.artifact.path} ({card.artifact.state})"]
    if card.moved:
        out.append(f"  moved to {card.moved.state}/ by {card.moved.role}, {age(card.moved.time, now)}")
    if card.flags:
        out.append("  ! " + "; ".join(card.flags))
    for r in card.mail:
        to = ", ".join(who(x, domain) for x in r.recipients)
        claim = f" [{r.state}]" if r.state else ""
        out.append(
            f"  {age(r.date, now):>8}  {r.event or 'mail':<22} {who(r.sender, domain)} → {to}{claim}  {r.message_id or ''}"
        )
    if not card.mail:
        out.append("  no mail about it yet")
    return "\n".join(out)


def row_json(r: Row) -> dict[str, Any]:
    return {
        "message_id": r.message_id,
        "event": r.event,
        "from": r.sender,
        "to": list(r.recipients),
        "state": r.state,
        "date": r.date,
        "subject": r.subject,
    }


def to_dict(config: Config, board: Sequence[Card]) -> dict[str, Any]:
    """The board as `workflow status --json` shows it."""
    return {
        "states": {
            s: [
                {
                    "path": c.artifact.path,
                    "root": c.artifact.root,
                    "name": c.artifact.name,
                    "last": row_json(c.last) if c.last else None,
                    "claim": c.claim.state if c.claim else None,
                    "moved_by": c.moved.role if c.moved else None,
                    "flags": c.flags,
                    "messages": len(c.mail),
                }
                for c in board
                if c.artifact.state == s
            ]
            for s in config.states
        }
    }


def refs_without_artifact(config: Config, rows: Sequence[Row], artifacts: Sequence[Artifact]) -> dict[str, list[Row]]:
    """Artifact references (under a root) that name nothing in any state folder now."""
    out: dict[str, list[Row]] = {}
    missing: dict[str, bool] = {}
    pool = Pool(config, artifacts)
    for r in unique(rows):
        for ref in r.artifacts:
            if ref not in missing:
                missing[ref] = split_ref(ref, config) is not None and not pool.locate(ref)
            if missing[ref]:
                out.setdefault(ref, []).append(r)
    return out
