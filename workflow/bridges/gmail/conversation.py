"""A reply-loop conversation on disk (docs/bridges.md): one directory per thread, files as the truth.

``conversations/<id>/`` holds ``sent.md`` (the mail that started it), ``.sent`` (its Message-ID,
role, recipient, subject, date), ``ids`` (every Message-ID of the thread: the sent mail, each
reply, each response — a reply to any of them belongs here), ``research/`` (files the session
may read), ``responses/NN-reply.md`` and ``NN-response.md`` (NN of a response = highest reply it
answers) and ``thread.md``, the whole exchange in order, rendered from those files: a reply not
yet answered has a ``## NEW Reply #N`` header. thread.md is only ever appended to or rendered
again from the files, so a line inside a reply's body is never edited. ``memory.txt`` beside the
conversations holds what sessions learned of their correspondents.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path

from workflow.app import App
from workflow.core.files import write_atomic

NUM_RE = re.compile(r"^(\d+)-(reply|response)\.md$")


def conv_id(message_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", message_id.strip("<>"))[:120]


def _max(d: Path, kind: str) -> int:
    if not d.is_dir():
        return 0
    nums = [int(m.group(1)) for m in (NUM_RE.match(p.name) for p in d.iterdir()) if m and m.group(2) == kind]
    return max(nums, default=0)


def max_reply(d: Path) -> int:
    return _max(d, "reply")


def max_response(d: Path) -> int:
    return _max(d, "response")


def unprocessed(d: Path) -> bool:
    return max_reply(d) > max_response(d)


def memory_file(app: App) -> Path:
    return app.config.state.conversations / "memory.txt"


def _locked_write(thread: Path, mode: str, text: str) -> None:
    thread.parent.mkdir(parents=True, exist_ok=True)
    with open(thread, mode, encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if mode == "r+":
                f.seek(0)
                f.truncate()
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def section(title: str, content: str) -> str:
    return f"\n## {title}\n\n{content.rstrip()}\n"


def append(thread: Path, title: str, content: str) -> None:
    """Append one section; concurrent appends are serialised by an exclusive lock on the file."""
    _locked_write(thread, "a", section(title, content))


def start(app: App, message_id: str, role: str, to: str, subject: str, body: str, date: str = "") -> Path:
    """A conversation for a role's mail to an outside address (idempotent)."""
    d = app.config.state.conversations / conv_id(message_id)
    if (d / ".sent").exists():
        return d
    for sub in ("responses", "research"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    date = date or time.strftime("%Y-%m-%d %H:%M")
    write_atomic(d / "sent.md", body.rstrip() + "\n")
    write_atomic(d / "ids", message_id + "\n")
    write_atomic(d / "thread.md", render(d, {"subject": subject, "to": to, "date": date}))
    write_atomic(
        d / ".sent", json.dumps({"message_id": message_id, "role": role, "to": to, "subject": subject, "date": date})
    )
    return d


def ids(d: Path) -> list[str]:
    """Every Message-ID of the conversation's thread."""
    try:
        return [ln for ln in (d / "ids").read_text(encoding="utf-8").splitlines() if ln]
    except OSError:
        return []


def role_of(d: Path) -> str:
    """The role whose mail started the conversation ("" when its ``.sent`` is unreadable)."""
    try:
        return str(json.loads((d / ".sent").read_text())["role"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def add_id(d: Path, message_id: str) -> None:
    """One more Message-ID of the thread (a reply, a response): mail answering it belongs here."""
    if message_id and message_id not in ids(d):
        with open(d / "ids", "a", encoding="utf-8") as f:
            f.write(message_id + "\n")
            f.flush()
            os.fsync(f.fileno())


def find(app: App, message_ids: list[str]) -> Path | None:
    """The conversation any of ``message_ids`` belongs to (a reply's In-Reply-To/References)."""
    base = app.config.state.conversations
    if not base.is_dir():
        return None
    wanted = set(message_ids)
    for mid in message_ids:
        d = base / conv_id(mid)
        if (d / ".sent").exists():
            return d
    for d in sorted(base.iterdir()):
        if (d / ".sent").exists() and wanted & set(ids(d)):
            return d
    return None


def record_reply(d: Path, sender: str, body: str, message_id: str, date: str = "") -> int:
    """NN-reply.md (atomic) and ``## NEW Reply #N`` in thread.md; returns N. A Message-ID already
    recorded is not recorded twice."""
    replies = d / "responses"
    seen = d / ".replies.json"
    known = json.loads(seen.read_text()) if seen.exists() else {}
    if message_id and message_id in known:
        return int(known[message_id])
    n = max_reply(replies) + 1
    while True:
        try:
            fd = os.open(replies / f"{n:02d}-reply.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            n += 1
    date = date or time.strftime("%Y-%m-%d %H:%M")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"From: {sender}\nMessage-ID: {message_id}\nDate: {date}\n\n{body.rstrip()}\n")
        f.flush()
        os.fsync(f.fileno())
    append(d / "thread.md", reply_title(n, date, sender, new=True), body)
    known[message_id] = n
    write_atomic(seen, json.dumps(known))
    add_id(d, message_id)
    return n


def reply_chain(d: Path) -> list[str]:
    """The sent mail's Message-ID, then every reply's, in order (a response's References)."""
    seen = d / ".replies.json"
    known: dict[str, int] = json.loads(seen.read_text()) if seen.exists() else {}
    sent = json.loads((d / ".sent").read_text())
    return [sent["message_id"], *sorted(known, key=lambda m: known[m])]


def reply_title(n: int, date: str, sender: str, *, new: bool) -> str:
    return f"{'NEW ' if new else ''}Reply #{n} ({date} from {sender})"


def render(d: Path, sent: dict[str, str] | None = None, *, new: bool = True) -> str:
    """thread.md from the files: the sent mail, then each reply and response in order; replies
    not yet answered are NEW (unless ``new`` is False: every marker removed)."""
    sent = sent or json.loads((d / ".sent").read_text())
    try:
        body = (d / "sent.md").read_text(encoding="utf-8")
    except OSError:
        body = "(the sent message was not kept)"
    parts = [f"# Thread — {sent['subject']}\n", section(f"Sent ({sent.get('date', '')} to {sent['to']})", body)]
    replies = d / "responses"
    nums = (
        sorted({int(m.group(1)) for m in (NUM_RE.match(p.name) for p in replies.iterdir()) if m})
        if replies.is_dir()
        else []
    )
    answered = max_response(replies)
    for n in nums:
        r = replies / f"{n:02d}-reply.md"
        if r.exists():
            head, _, text = r.read_text(encoding="utf-8").partition("\n\n")
            fields = dict(ln.split(": ", 1) for ln in head.splitlines() if ": " in ln)
            parts.append(
                section(reply_title(n, fields.get("Date", ""), fields.get("From", "?"), new=new and n > answered), text)
            )
        resp = replies / f"{n:02d}-response.md"
        if resp.exists():
            parts.append(section(f"Response to Reply #{n}", resp.read_text(encoding="utf-8")))
    return "".join(parts)


def remove_new_markers(thread: Path) -> None:
    """Every ``## NEW Reply #N`` header becomes ``## Reply #N``: thread.md is rendered again from
    the files, so nothing inside a reply's body is touched."""
    _locked_write(thread, "r+" if thread.exists() else "w", render(thread.parent, new=False))


def rebuild_thread(d: Path) -> str:
    """thread.md again from the files (when it is lost or corrupt), the sent mail included."""
    text = render(d)
    write_atomic(d / "thread.md", text)
    return text
