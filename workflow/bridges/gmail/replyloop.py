"""Reply loop (docs/bridges.md): external replies to a role's mail, answered by one agent session per batch.

A conversation starts when the bridge submits a role's mail to someone outside the domain:
the state directory's ``conversations/<id>/`` gets ``thread.md`` (the sent mail), ``.sent`` (its
Message-ID, role, recipient, subject) and ``responses/``. Each reply that comes back is recorded
as ``responses/NN-reply.md`` and appended to thread.md as ``## NEW Reply #N``. Unprocessed means
max reply number > max response number (file numbers, not thread.md, are the state machine).
``trigger`` is dumb on purpose: a live ``.processing`` lock → skip; nothing unprocessed → skip;
else take the lock and spawn one session. A lock whose process is gone or older than 10 minutes
is stale and cleared; the next poll is the retry. The session (``respond``) inlines thread.md in
the prompt, runs the role's backend, writes ``NN-response.md`` (NN = highest reply addressed),
sends it as a threaded reply (In-Reply-To the last reply, References the whole chain), appends it
to thread.md, removes the NEW markers and drops the lock. The lock is ``locks.py``'s, as agentd's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from workflow.agents import locks
from workflow.agents.backends import RunInput, make_backend
from workflow.agents.tools import RoleTools
from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.core.files import write_atomic
from workflow.delivery.transport import make_transport
from workflow.mail.message import Draft, build, make_message_id, reply_subject

STALE = 600.0
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


def append(thread: Path, section: str, content: str) -> None:
    """Append one section; concurrent appends are serialised by an exclusive lock on the file."""
    thread.parent.mkdir(parents=True, exist_ok=True)
    with open(thread, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(f"\n## {section}\n\n{content.rstrip()}\n")
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def remove_new_markers(thread: Path) -> None:
    with open(thread, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            text = f.read()
            fixed = re.sub(r"^## NEW (Reply #\d+)", r"## \1", text, flags=re.M)
            f.seek(0)
            f.write(fixed)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def start(app: App, message_id: str, role: str, to: str, subject: str, body: str, date: str = "") -> Path:
    """A conversation for a role's mail to an outside address (idempotent)."""
    d = app.config.state.conversations / conv_id(message_id)
    if (d / ".sent").exists():
        return d
    (d / "responses").mkdir(parents=True, exist_ok=True)
    write_atomic(
        d / "thread.md",
        f"# Thread — {subject}\n\n## Sent ({date or time.strftime('%Y-%m-%d %H:%M')} to {to})\n\n{body.rstrip()}\n",
    )
    write_atomic(d / ".sent", json.dumps({"message_id": message_id, "role": role, "to": to, "subject": subject}))
    return d


def find(app: App, ids: list[str]) -> Path | None:
    """The conversation a reply belongs to, from its In-Reply-To/References."""
    base = app.config.state.conversations
    for mid in ids:
        d = base / conv_id(mid)
        if (d / ".sent").exists():
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
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"From: {sender}\nMessage-ID: {message_id}\nDate: {date}\n\n{body.rstrip()}\n")
        f.flush()
        os.fsync(f.fileno())
    append(d / "thread.md", f"NEW Reply #{n} ({date or time.strftime('%Y-%m-%d %H:%M')} from {sender})", body)
    known[message_id] = n
    write_atomic(seen, json.dumps(known))
    return n


def lock_path(d: Path) -> Path:
    return d / "responses" / ".processing"


def trigger(app: App, d: Path, spawn: Callable[[Path], int] | None = None) -> bool:
    """Start one session for a conversation's unprocessed replies; True when one was spawned."""
    if not unprocessed(d / "responses"):
        return False
    held = locks.acquire(lock_path(d), STALE, max_age=STALE)  # clears a stale lock (holder gone, or 10 min old)
    if held is None:
        return False
    pid = (spawn or (lambda conv: _spawn(app, conv)))(d)
    # The lock now names the session's process, so a crashed session's lock goes stale at once.
    write_atomic(lock_path(d), locks.dump(locks.holder(lock_path(d), pid)._replace(started=held.started)))
    return True


def _spawn(app: App, d: Path) -> int:
    argv = (
        [sys.executable, "-m", "workflow"]
        + (["--config", str(app.config.path)] if app.config.path else [])
        + ["--mail-root", str(app.config.mail_root), "bridge", "respond", str(d)]
    )
    log = open(d / "responses" / "session.log", "ab")
    try:
        return subprocess.Popen(
            argv, cwd=app.config.project_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        ).pid
    finally:
        log.close()


def prompt(d: Path) -> str:
    thread = d / "thread.md"
    if not thread.exists():
        raise WorkflowError(f"{thread} is missing; rebuild it with `workflow bridge rebuild-thread {d}`")
    n = max_reply(d / "responses")
    return (
        f"You answer replies to mail you sent.\n\n## Thread\n\n{thread.read_text(encoding='utf-8')}\n\n"
        f"## Respond\nRespond to all replies marked NEW above, in one message. Your answer is sent as "
        f"{n:02d}-response.md, a reply in this thread. Write only the text of the answer.\n"
    )


def respond(app: App, d: Path, say: Callable[[str], None], backend: str | None = None) -> Path | None:
    """One session: answer every NEW reply, send it threaded, record it, drop the lock."""
    sent = json.loads((d / ".sent").read_text())
    role = app.roster.roles[sent["role"]]
    try:
        n = max_reply(d / "responses")
        if n <= max_response(d / "responses"):
            return None
        transport = make_transport(app.config, app.deliverer)
        res = make_backend(app.config, backend or role.backend).run(
            RunInput(role, prompt(d), RoleTools(app, role, transport, read_only=True))
        )
        if not res.ok:
            say(f"session failed: {res.error}; the replies stay unprocessed for the next poll")
            return None
        out = d / "responses" / f"{n:02d}-response.md"
        write_atomic(out, res.summary.strip() + "\n")
        replies = [json.loads((d / ".replies.json").read_text())] if (d / ".replies.json").exists() else [{}]
        chain = [sent["message_id"], *sorted(replies[0], key=lambda m: replies[0][m])]
        raw = _reply_bytes(app, sent, chain, res.summary, make_message_id(role.name, app.config.domain))
        transport.send(raw, app.roster.address(role.name), [sent["to"]])
        append(d / "thread.md", f"Response to Reply #{n}", res.summary)
        remove_new_markers(d / "thread.md")
        say(f"answered replies up to #{n}")
        return out
    finally:
        lock = lock_path(d)
        info = locks.read(lock)
        if info is not None and info.pid in (os.getpid(), os.getppid()):
            lock.unlink(missing_ok=True)


def _reply_bytes(app: App, sent: dict[str, str], chain: list[str], body: str, mid: str) -> bytes:
    return build(
        Draft(
            sender=app.roster.address(sent["role"]),
            to=[sent["to"]],
            subject=reply_subject(sent["subject"]),
            body=body.rstrip() + "\n",
            message_id=mid,
            in_reply_to=chain[-1],
            references=chain,
            date=datetime.now(UTC),
        )
    )


def rebuild_thread(d: Path) -> str:
    """thread.md again from the numbered files (when it is lost or corrupt)."""
    sent = json.loads((d / ".sent").read_text())
    parts = [f"# Thread — {sent['subject']}\n\n## Sent (to {sent['to']})\n"]
    replies = d / "responses"
    nums = sorted({int(m.group(1)) for m in (NUM_RE.match(p.name) for p in replies.iterdir()) if m})
    answered = max_response(replies)
    for n in nums:
        r = replies / f"{n:02d}-reply.md"
        if r.exists():
            head, _, body = r.read_text(encoding="utf-8").partition("\n\n")
            who = next((ln[6:] for ln in head.splitlines() if ln.startswith("From: ")), "?")
            mark = "" if n <= answered else "NEW "
            parts.append(f"\n## {mark}Reply #{n} (from {who})\n\n{body.rstrip()}\n")
        resp = replies / f"{n:02d}-response.md"
        if resp.exists():
            parts.append(f"\n## Response to Reply #{n}\n\n{resp.read_text(encoding='utf-8').rstrip()}\n")
    text = "".join(parts)
    write_atomic(d / "thread.md", text)
    return text
