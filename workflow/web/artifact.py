"""Artifact page: what ``/artifact?path=…`` shows a viewer — an artifact's text, the diff between
two of its versions, its versions, and its timeline of mail and commits.

The path is one a card or a message names (``specs/proposed/x.md``, or a glob such as
``specs/*/x.md``), found where the artifact is now (``core.locate``: a concrete old path finds it
in its new folder). An artifact's text and history are the team's: everyone logged in reads them.
Its timeline's mail is only what the viewer may read (``Sight``: the query asks for the viewer's
mailboxes and its own sent mail only), each linking to its thread; its commits come from git
(``artifacts.versions``). A path that names no artifact, or one that cannot be read (a symlink,
a dotfile, outside every root), is the same ``None``: the server answers 404 to both.

The versions a diff compares are commits of its history, or ``now`` (the working tree, when it
differs from the newest commit). By default it shows what changed since the version reviewed
before: the newest version a readable review-request recorded (``X-Artifact-Version``) that
differs from the text now; else the version before the newest.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Sequence
from typing import NamedTuple

from workflow.app import App
from workflow.artifacts.versions import Version, blob_bytes, history
from workflow.core import events, safeopen
from workflow.core.errors import ArtifactError
from workflow.core.locate import Artifact, locate, matches, split_ref
from workflow.core.senders import local_part, who
from workflow.mail.artparts import VERSION_HEADER, is_text, read_version
from workflow.mail.inbox import read_row
from workflow.mail.message import parse
from workflow.mail.rows import Row
from workflow.policy.visibility import Sight
from workflow.web import markdown

NOW = "now"
TIMELINE = 300  # messages of the timeline at most (the newest)
VERSIONED = events.VERSIONED  # the events whose mail records the version it carried
DECIDED = tuple(events.DECISIONS)


class Choice(NamedTuple):
    """A version a diff may compare, as the page lists it."""

    key: str  # a commit id, or NOW
    time: int
    role: str
    subject: str
    path: str
    blob: str
    reviewed: bool  # a readable review-request recorded this version


class Entry(NamedTuple):
    """One line of the timeline: a message or a commit."""

    time: int
    kind: str  # "mail" | "commit"
    what: str  # the event, "move FROM -> TO" or "commit"
    who: str
    version: str  # the commit (short) the mail carried, or "blob … (not committed)", or ""
    message_id: str  # for mail: the thread to link to
    commit: str  # for a commit: its id
    text: str  # the commit's subject, the message's subject


class Page(NamedTuple):
    artifact: Artifact
    asked: str  # the path as asked for
    html: str  # the text as safe HTML ("" when it is not text)
    note: str  # why there is no text to show
    choices: tuple[Choice, ...]  # newest first
    a: str
    b: str
    diff: str
    timeline: tuple[Entry, ...]  # oldest first
    review: Row | None  # the review-request the viewer's role was asked and has not decided


def page(app: App, sight: Sight, asked: str, a: str = "", b: str = "") -> Page | None:
    """The artifact page of ``asked`` for the viewer ``sight``; None when it names no readable artifact."""
    found = locate(asked[:1000], app.config)
    if not found:
        return None
    art = sorted(found, key=lambda x: app.config.states.index(x.state))[0]
    try:
        data, total = safeopen.read_sized(app.config, art.path)
    except ArtifactError:
        return None
    text = data.decode("utf-8") if is_text(data, whole=len(data) == total) else None
    rows = _mail(app, sight, art)
    carried = _carried(app, rows, art)
    versions = history(app.config, art)
    now_blob = _blob_id(data) if len(data) == total else ""
    reviewed = {blob for r in rows if r.event == "review-request" for blob in carried.get(r.message_id or "", ())}
    choices = [Choice(v.commit, v.time, v.role, v.subject, v.path, v.blob, v.blob in reviewed) for v in versions]
    if not choices or choices[0].blob != now_blob:
        choices.insert(
            0, Choice(NOW, 0, "", "the working tree (not committed)", art.path, now_blob, now_blob in reviewed)
        )
    keys = {c.key: c for c in choices}
    b = b if b in keys else choices[0].key
    a = a if a in keys else _before(choices, rows, carried, keys[b])
    diff = _diff(app, keys, a, b, data if text is not None else None)
    return Page(
        art,
        asked,
        markdown.render(text) if text is not None else "",
        "" if text is not None else f"{art.path} is not text ({total} bytes); read it in the repository",
        tuple(choices),
        a,
        b,
        diff,
        tuple(_timeline(app, rows, carried, versions)),
        _review(app, sight, art, rows),
    )


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _mail(app: App, sight: Sight, art: Artifact) -> list[Row]:
    """The messages about ``art`` the viewer may read (one copy each), oldest first."""
    with app.index() as index:
        index.refresh(sight.boxes)
        rows = index.query(sight.boxes, artifact_like=art.name, senders=sight.sent)
    seen: set[str] = set()
    out = []
    for r in rows:
        if not _about(app, r.artifacts, art) or (r.message_id or r.key) in seen:
            continue
        seen.add(r.message_id or r.key)
        out.append(r)
    return out[-TIMELINE:]


def _about(app: App, refs: Sequence[str], art: Artifact) -> bool:
    for ref in refs:
        s = split_ref(ref, app.config)
        if s is not None and s.root == art.root and matches(art.name, s.name):
            return True
    return False


def _carried(app: App, rows: Sequence[Row], art: Artifact) -> dict[str, tuple[str, ...]]:
    """Message-ID → the blob ids of this artifact's versions the message recorded."""
    out: dict[str, tuple[str, ...]] = {}
    for r in rows:
        if r.event not in VERSIONED or not r.message_id:
            continue
        raw = read_row(app.config.mail_root, r)
        if raw is None:
            continue
        blobs = []
        for value in parse(raw).get_all(VERSION_HEADER):
            got = read_version(value)
            s = split_ref(got[1], app.config) if got is not None else None
            if got is not None and s is not None and (s.root, s.name) == art.key:
                blobs.append(got[0])
        out[r.message_id] = tuple(blobs)
    return out


def _before(choices: Sequence[Choice], rows: Sequence[Row], carried: dict[str, tuple[str, ...]], b: Choice) -> str:
    """The version to compare ``b`` with: the newest one a review-request recorded that differs
    from it, else the one just before it, else itself."""
    by_blob: dict[str, str] = {}
    for c in reversed(choices):  # oldest first: the newest commit of a blob wins
        if c.blob:
            by_blob[c.blob] = c.key
    for r in reversed(rows):
        if r.event != "review-request":
            continue
        for blob in carried.get(r.message_id or "", ()):
            if blob != b.blob and blob in by_blob:
                return by_blob[blob]
    keys = [c.key for c in choices]
    i = keys.index(b.key)
    return keys[i + 1] if i + 1 < len(keys) else b.key


def _diff(app: App, keys: dict[str, Choice], a: str, b: str, now: bytes | None) -> str:
    if a == b:
        return ""
    texts = []
    for k in (a, b):
        data = now if k == NOW else blob_bytes(app.config, keys[k].blob) if keys[k].blob else b""
        if data is None or not is_text(data):
            return "[not text: no diff shown]"
        texts.append(data.decode("utf-8"))
    name = {k: f"{keys[k].path or '(removed)'} ({'now' if k == NOW else k[:10]})" for k in (a, b)}
    lines = difflib.unified_diff(
        texts[0].splitlines(keepends=True), texts[1].splitlines(keepends=True), f"a/{name[a]}", f"b/{name[b]}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _timeline(
    app: App, rows: Sequence[Row], carried: dict[str, tuple[str, ...]], versions: Sequence[Version]
) -> list[Entry]:
    """The artifact's mail and commits, oldest first. Within one second (both clocks count
    seconds) a message comes after the commit of the version it carried and before the next
    commit; one that carried none comes before a move (the decision that made it) and after an edit."""
    commits = list(reversed(versions))  # oldest first
    first: dict[str, int] = {}
    for i, v in enumerate(commits):
        if v.blob:
            first.setdefault(v.blob, i)
    domain = app.config.domain
    out: list[Entry] = []
    c = 0
    for r in rows:
        blobs = carried.get(r.message_id or "", ())
        held = [first[x] for x in blobs if x in first]
        while c < len(commits) and _commit_first(commits[c], c, r.date, held):
            out.append(_commit_entry(commits[c]))
            c += 1
        shown = ", ".join(
            commits[first[x]].commit[:10] if x in first else f"blob {x[:10]} (not committed)" for x in blobs
        )
        out.append(
            Entry(r.date, "mail", r.event or "mail", who(r.sender, domain), shown, r.message_id or "", "", r.subject)
        )
    out.extend(_commit_entry(v) for v in commits[c:])
    return out


def _commit_first(v: Version, index: int, date: int, held: Sequence[int]) -> bool:
    """Whether commit ``v`` (``index``: its place, oldest first) came before a message of ``date``
    that carried the versions first committed at ``held``."""
    if v.time != date:
        return v.time < date
    if held:
        return index <= max(held)
    return not v.moved


def _commit_entry(v: Version) -> Entry:
    return Entry(v.time, "commit", f"move {v.moved}" if v.moved else "commit", v.role, "", "", v.commit, v.subject)


def _review(app: App, sight: Sight, art: Artifact, rows: Sequence[Row]) -> Row | None:
    """The newest review-request of ``art`` the viewer's role received and no decision of it
    answered, while the artifact is in proposed/ (where a decision applies)."""
    if art.state != "proposed":
        return None
    mine = set(sight.boxes)
    decided = {r.in_reply_to for r in rows if r.event in DECIDED and r.in_reply_to}
    for r in reversed(rows):
        received = r.mailbox in mine and local_part(r.sender, app.config.domain) not in mine
        if r.event == "review-request" and received and r.message_id not in decided:
            return r
    return None
