"""Inbox: what a role should read next — filtered, prioritised, grouped by thread — and transcripts.

Priority ("blockers first, then reviews, then status"; docs/message-format.md): blocker-report;
review-request, clarification-request, question; approval, rejection, answer; status-update;
anything else last. Reading never marks a message.
"""

from __future__ import annotations

import os
import time

from workflow.core import events
from workflow.core.locate import has_glob, literal, matches
from workflow.core.senders import who
from workflow.mail.maildir import read_at
from workflow.mail.threads import Threads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import NamedTuple

    from workflow.mail.reader import Reader
    from workflow.mail.rows import Row
else:
    from workflow.core.records import NamedTuple


def priority(event: str | None) -> int:
    return events.get(event).priority


def artifact_matches(pattern: str, artifacts: Sequence[str], states: Sequence[str] = ()) -> bool:
    """A filter matches a stored path or glob either way round, or as a plain substring; with
    ``states``, ROOT/STATE/NAME paths match by root and name whatever their state folders say
    (mail about specs/proposed/x.md is about x after it moved to todo/)."""
    for a in artifacts:
        if matches(a, pattern) or matches(pattern, a):
            return True
        if not has_glob(pattern) and pattern in a:
            return True
        if states and _same_artifact(pattern, a, states):
            return True
    return False


def _same_artifact(x: str, y: str, states: Sequence[str]) -> bool:
    px, py = x.split("/", 2), y.split("/", 2)
    if len(px) < 3 or len(py) < 3 or px[0] != py[0]:
        return False
    if not all(p[1] in states or has_glob(p[1]) for p in (px, py)):
        return False
    return matches(px[2], py[2]) or matches(py[2], px[2])


class InboxThread(NamedTuple):
    root: str
    messages: tuple[Row, ...]

    @property
    def priority(self) -> int:
        return min(priority(m.event) for m in self.messages)

    def to_dict(self, now: Callable[[str], list[str]]) -> dict[str, object]:
        """The thread for ``--json``; ``now`` says where each named artifact is today."""
        return {
            "root": self.root,
            "priority": self.priority,
            "messages": [{**m.to_dict(), "artifacts_now": {a: now(a) for a in m.artifacts}} for m in self.messages],
        }


def select(
    index: Reader,
    mailboxes: Sequence[str],
    *,
    unread: bool = True,
    event: str | None = None,
    state: str | None = None,
    artifact: str | None = None,
    states: Sequence[str] = (),
) -> list[Row]:
    """The rows a role sees under these filters (copies of one message in several mailboxes once)."""
    # Prefilter in SQL on the longest literal run of the last path component (the artifact's
    # name, shared by a concrete path and a state glob like specs/*/auth.md), then match exactly.
    like = literal(artifact.rsplit("/", 1)[-1]) if artifact else None
    rows = index.query(mailboxes, unread=unread, event=event, state=state, artifact_like=like or None)
    if artifact:
        rows = [r for r in rows if artifact_matches(artifact, r.artifacts, states)]
    return unique(rows)


def unique(rows: Iterable[Row]) -> list[Row]:
    """One row per message (copies in several mailboxes share a Message-ID)."""
    seen: set[str] = set()
    out = []
    for r in rows:
        key = r.message_id or f"{r.mailbox}/{r.key}"
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def group(rows: Sequence[Row]) -> list[InboxThread]:
    """Group rows into threads (messages sharing any ancestor), most urgent thread first."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    own: list[str] = []
    for r in rows:
        mid = r.message_id or f"{r.mailbox}/{r.key}"
        own.append(mid)
        root = find(mid)
        for ref in r.ancestry:
            other = find(ref)
            if other != root:
                parent[other] = root
    groups: dict[str, list[Row]] = {}
    for mid, r in zip(own, rows, strict=True):
        groups.setdefault(find(mid), []).append(r)
    threads = [
        InboxThread(
            msgs[0].refs[0] if msgs[0].refs else (msgs[0].message_id or ""),
            tuple(sorted(msgs, key=lambda m: (m.date, m.key, m.mailbox))),
        )
        for msgs in groups.values()
    ]
    threads.sort(key=lambda t: (t.priority, t.messages[0].date, t.messages[0].key))
    return threads


def thread_rows(index: Reader, mailboxes: Sequence[str], message_id: str, senders: Sequence[str] = ()) -> list[Row]:
    """The thread holding ``message_id`` as far as these mailboxes (and these senders' own mail) show it.

    Every row records its thread root as it knows it (first Reference, else parent). Grow a set
    of ids — the start's ancestry, then each found row's id and root — and fetch rows whose root
    or Message-ID is in it, through the index, until nothing new appears; then order with JWZ.
    """
    start = index.query(mailboxes, message_ids=[message_id], senders=senders)
    if not start:
        return []
    found: dict[str, Row] = {}
    ids: set[str] = set()
    frontier = {message_id, *start[0].ancestry, *(r.root for r in start if r.root)}
    while frontier:
        ids |= frontier
        rows = index.thread_part(sorted(frontier), mailboxes, senders)
        frontier = set()
        for r in rows:
            if not r.message_id:
                continue
            prev = found.get(r.message_id)
            if prev is None or (r.mailbox in mailboxes and prev.mailbox not in mailboxes):
                found[r.message_id] = r  # prefer the viewer's own copy (its flags are the viewer's)
            for x in (r.message_id, r.root, *r.ancestry):
                if x and x not in ids:
                    frontier.add(x)
    threads = Threads((r.message_id or "", r.in_reply_to, r.refs) for r in found.values())
    order = threads.members(message_id)  # depth first: a parent always before its replies
    rank = {m: i for i, m in enumerate(order)}
    return sorted((found[m] for m in order if m in found), key=lambda r: (r.date, rank[r.message_id or ""]))


def read_row(mail_root: str | os.PathLike[str], r: Row) -> bytes | None:
    """The bytes of the copy a row names: at the place the index recorded, else wherever it has
    gone since (a scan of its mailbox); None when it is gone."""
    return read_at(os.path.join(mail_root, r.mailbox), r.mailbox, r.key, r.subdir, r.flags)


def _when(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts else "????-??-?? ??:??"


def render_inbox(
    owner: str,
    threads: Sequence[InboxThread],
    unread_only: bool,
    now: Callable[[str], list[str]] | None = None,
    *,
    domain: str,
) -> str:
    """The inbox as text; with ``now`` (artifacts.Resolver.now), where a moved artifact is today.
    Senders are named as ``core.addresses.who`` names them (a role only for ``domain``'s address)."""
    n = sum(len(t.messages) for t in threads)
    what = "unread message" if unread_only else "message"
    lines = [f"{owner}: {n} {what}{'' if n == 1 else 's'} in {len(threads)} thread{'' if len(threads) == 1 else 's'}"]
    for t in threads:
        lines.append("")
        lines.append(f"▸ {t.messages[0].subject}")
        for m in t.messages:
            mark = " " if m.seen else "N"
            arts = ",".join(m.artifacts) or "-"
            state = f" ({m.state})" if m.state else ""
            if now is not None:
                moved = [p for ref in m.artifacts if not has_glob(ref) for p in now(ref) if p != ref]
                if moved:
                    state += f" → now {','.join(moved)}"
            lines.append(
                f"  {mark} {_when(m.date)}  {m.event or 'mail':<21} from {who(m.sender, domain):<18} {arts}{state}"
            )
            lines.append(f"      {m.message_id}")
    return "\n".join(lines) + "\n"


def _copies(raw: bytes) -> list[str]:
    """The texts of a message's copies of the artifact (the short reader first, the MIME one else)."""
    from workflow.mail.body import our_copies  # lazy: start-up time; only a thread with copies needs it

    texts = our_copies(raw)
    if texts is not None:
        return texts
    from workflow.mail.artparts import copies  # lazy: the MIME reader, for mail we did not make

    return [c.text for c in copies(raw)]


def render_thread(
    rows: Sequence[Row],
    mail_root: str | os.PathLike[str],
    mailboxes: Sequence[str] = (),
    how: str = "`workflow read MESSAGE-ID --part N --as ROLE`",
    *,
    domain: str,
) -> str:
    """The thread as a Markdown transcript (the reply loop's thread.md shape, docs/bridges.md); the reader's unread say NEW.
    Each message's attachments are listed under its text; ``how`` says how to read one."""
    if not rows:
        return ""
    from workflow.mail.body import readable  # lazy: start-up time; only a transcript needs bodies
    from workflow.mail.quoted import copy_lines, without_copies

    raws = [read_row(mail_root, r) for r in rows]
    quoted = frozenset[str]()  # the lines of the artifact's copies in the thread: a reply's quote of one goes
    if any(raw is not None and b"x-workflow-copy" in raw.lower() for raw in raws):
        quoted = copy_lines(t for raw in raws if raw is not None for t in _copies(raw))
    out = [f"# Thread: {rows[0].subject}", ""]
    for i, (r, raw) in enumerate(zip(rows, raws, strict=True)):
        body = without_copies(readable(raw).shown(how).rstrip("\n"), quoted) if raw is not None else ""
        new = "NEW " if (not r.seen and r.mailbox in mailboxes) else ""
        out.append(f"## {new}{r.event or 'mail'} from {who(r.sender, domain)} ({_when(r.date)} UTC)")
        meta = [f"To: {', '.join(who(a, domain) for a in r.recipients)}"]
        if r.artifacts:
            meta.append(f"Artifacts: {', '.join(r.artifacts)}")
        if r.state:
            meta.append(f"State: {r.state}")
        out.append(" · ".join(meta))
        out.append(f"Message-ID: {r.message_id}" + (f" · In-Reply-To: {r.in_reply_to}" if r.in_reply_to else ""))
        out.append("")
        out.append(body)
        out.append("")
        if i != len(rows) - 1:
            out.append("---")
            out.append("")
    return "\n".join(out)
