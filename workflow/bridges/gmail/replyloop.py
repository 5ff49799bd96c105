"""Reply loop (docs/bridges.md): external replies to a role's mail, answered by one agent session per batch.

The conversation's files are ``conversation.py``'s. ``trigger`` is dumb on purpose: a live
``responses/.processing`` lock → skip; nothing unprocessed → skip; a conversation whose sessions
keep failing waits (the next poll retries after one failure; then 1 min, doubling to 1 h) and is reported once per
failure; else take the lock and spawn one session. A lock is stale when its mtime is 10 minutes
old, or at once when it names a session process of ours that is gone (the long-running bridge
reaps its sessions each poll, so a crashed one is no zombie); a lock someone else wrote (empty,
an ISO timestamp) is honoured until it is 10 minutes old. The session (``respond``) gets the
whole thread.md, the conversation's research files, memory.txt, the tools it may use, the
trivial-vs-substantive triage and the memory step in its prompt, and is one run of the role
(run-role's transaction, on agentd's books: ``agentd.bridged``): the threaded reply is staged in
the run and sent only when it commits, so a session that fails or is killed sends nothing and its
replies wait. Once the run commits, the answer is recorded (``.answer.json``, then
``NN-response.md``, thread.md without NEW markers, what it learned in memory.txt — finished by
the next session if a crash cut it short), and the lock is dropped.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from workflow.agentd import bridged
from workflow.agents.backends import RunResult
from workflow.agents.locks import pid_alive
from workflow.agents.runrole import Ask, run_role
from workflow.agents.tools import SCHEMAS
from workflow.app import App
from workflow.bridges.gmail import conversation as conv
from workflow.core.errors import WorkflowError
from workflow.core.files import write_atomic
from workflow.delivery.transport import Transport, make_transport
from workflow.mail.message import Draft, build, make_message_id, reply_subject

STALE = 600.0
BACKOFF_FIRST = 60.0
BACKOFF_MAX = 3600.0
WRITE_TOOLS = ("write_artifact", "move_artifact", "send_message")
MEMORY_MARK = "MEMORY:"


def lock_path(d: Path) -> Path:
    return d / "responses" / ".processing"


def lock_stale(lock: Path, now: float | None = None) -> str | None:
    """Why a lock may be cleared, or None while it holds: 10 minutes by mtime, or at once when it
    names a session process of ours on this host that is gone. A lock we did not write (empty,
    an ISO timestamp) holds until it is 10 minutes old."""
    try:
        st = lock.stat()
        text = lock.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "gone"
    except OSError:
        return None
    age = (now if now is not None else time.time()) - st.st_mtime
    if age > STALE:
        return f"lock is {age / 60:.0f} min old"
    try:
        data = json.loads(text)
        pid, host = int(data["pid"]), str(data["host"])
    except (ValueError, KeyError, TypeError):
        return None
    if host == socket.gethostname() and pid > 0 and not pid_alive(pid):
        return f"session process {pid} died"
    return None


def _take(lock: Path, pid: int) -> bool:
    """Create the lock naming ``pid``, atomically (published whole with link); False if it exists."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    tmp = lock.with_name(f".{lock.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    tmp.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": time.time()}), encoding="utf-8")
    try:
        os.link(tmp, lock)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


# ------------------------------------------------------------------ failures and back-off


def _failures_file(d: Path) -> Path:
    return d / "responses" / ".failures.json"


def failures(d: Path) -> dict[str, object]:
    try:
        data = json.loads(_failures_file(d).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def note_failure(d: Path, error: str) -> int:
    """One more failed session; returns how many in a row."""
    f = failures(d)
    count = int(str(f.get("count", 0))) + 1
    write_atomic(
        _failures_file(d),
        json.dumps({"count": count, "error": error, "at": time.time(), "reported": f.get("reported", 0)}),
    )
    return count


def backoff_left(d: Path, now: float | None = None) -> float:
    """Seconds until the conversation may have another session (0: now)."""
    f = failures(d)
    count = int(str(f.get("count", 0)))
    if count <= 1:
        return 0.0  # one failure (a crash, a flaky backend): the next poll retries
    wait = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (count - 2))
    return float(max(0.0, float(str(f.get("at", 0))) + wait - (now if now is not None else time.time())))


def report(d: Path) -> str | None:
    """The failure report for the bridge's output, once per failure (None when said already)."""
    f = failures(d)
    count = int(str(f.get("count", 0)))
    if count == 0 or int(str(f.get("reported", 0))) >= count:
        return None
    write_atomic(_failures_file(d), json.dumps({**f, "reported": count}))
    return (
        f"conversation {d.name}: {count} failed session(s) in a row (last: {f.get('error')}); "
        f"next try in {backoff_left(d):.0f}s"
    )


# ------------------------------------------------------------------ sessions


def reap() -> None:
    """Collect finished session processes (the bridge's children), so a crashed one is no zombie
    whose lock would look held."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def trigger(app: App, d: Path, spawn: Callable[[Path], int] | None = None) -> bool:
    """Start one session for a conversation's unprocessed replies; True when one was spawned."""
    if not conv.unprocessed(d / "responses"):
        return False
    lock = lock_path(d)
    if lock.exists():
        why = lock_stale(lock)
        if why is None:
            return False
        if why.startswith("session process"):
            note_failure(d, why)
        lock.unlink(missing_ok=True)
    if backoff_left(d) > 0:
        return False
    if not _take(lock, os.getpid()):
        return False
    pid = (spawn or (lambda c: _spawn(app, c)))(d)
    # The lock now names the session's process, so a crashed session's lock is stale at once.
    write_atomic(lock, json.dumps({"pid": pid, "host": socket.gethostname(), "started": time.time()}))
    return True


def _spawn(app: App, d: Path) -> int:
    """``workflow bridge respond D`` in its own session, output to the conversation's session.log.
    Spawned without a Popen (nothing waits for it but ``reap``): the bridge does not wait for it."""
    argv = (
        [sys.executable, "-P", "-m", "workflow"]  # -P: the project never shadows the package
        + (["--config", str(app.config.path)] if app.config.path else [])
        + ["--mail-root", str(app.config.mail_root), "bridge", "respond", str(d)]
    )
    log = os.open(d / "responses" / "session.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        dup = os.POSIX_SPAWN_DUP2
        return os.posix_spawn(
            sys.executable,
            argv,
            dict(os.environ),
            file_actions=[(dup, null, 0), (dup, log, 1), (dup, log, 2)],
            setsid=True,
        )
    finally:
        os.close(log)
        os.close(null)


def prompt(app: App, d: Path) -> str:
    """The session's prompt: the whole thread, what context there is, the triage, the steps."""
    thread = d / "thread.md"
    if not thread.exists():
        raise WorkflowError(f"{thread} is missing; rebuild it with `workflow bridge rebuild-thread {d}`")
    sent = json.loads((d / ".sent").read_text())
    n = conv.max_reply(d / "responses")
    research = sorted(p.name for p in (d / "research").iterdir()) if (d / "research").is_dir() else []
    tools = [f"  - {s['name']}: {s['description']}" for s in SCHEMAS if s["name"] not in WRITE_TOOLS]
    return (
        f'You are {sent["role"]}\'s reply handler for the conversation "{sent["subject"]}" with {sent["to"]}.\n\n'
        f"## Thread\n\n{thread.read_text(encoding='utf-8')}\n\n"
        "## Available context\n\nIf you need deeper context:\n"
        f"- {d / 'research'}/ — {', '.join(research) if research else 'no research files yet'}\n"
        f"- {conv.memory_file(app)} — what you know of your correspondents' preferences\n"
        "- Tools (read-only):\n" + "\n".join(tools) + "\n\nRead what you need. You may not need any of it.\n\n"
        '## Triage\n\nTrivial ("thanks!", "ok", "got it") → a brief acknowledgement; load no context.\n'
        "Substantive → read the research and memory you need, then answer.\n\n"
        "## Respond\n\nRespond to all replies marked NEW above, in one message.\n"
        f"1. Write only the text of the answer: it is kept as {n:02d}-response.md (NN = highest reply answered)\n"
        "   and sent as a reply in this thread.\n"
        f"2. Memory: if you learned a preference of your correspondent, end with a line `{MEMORY_MARK} <what to\n"
        "   remember>` (one per preference); those lines are kept in memory.txt, not sent.\n"
    )


def split_memory(answer: str) -> tuple[str, list[str]]:
    """The answer to send and the memory lines it ends with."""
    keep, notes = [], []
    for line in answer.splitlines():
        if line.strip().startswith(MEMORY_MARK):
            note = line.strip()[len(MEMORY_MARK) :].strip()
            if note:
                notes.append(note)
        else:
            keep.append(line)
    return "\n".join(keep).strip(), notes


def _answer_file(d: Path) -> Path:
    return d / "responses" / ".answer.json"


def finish_answer(app: App, d: Path) -> Path | None:
    """Record an answer whose run committed (its reply is sent, or is sent by the run's recovery):
    ``NN-response.md``, the thread, the memory. Safe to repeat after a crash part-way."""
    f = _answer_file(d)
    try:
        a = json.loads(f.read_text(encoding="utf-8"))
        n, answer, notes = int(a["n"]), str(a["answer"]), [str(x) for x in a["notes"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        f.unlink(missing_ok=True)  # not one we wrote whole: its run committed nothing it names
        return None
    out = d / "responses" / f"{n:02d}-response.md"
    if notes and not out.exists():
        sent = json.loads((d / ".sent").read_text())
        with open(conv.memory_file(app), "a", encoding="utf-8") as m:
            m.writelines(f"{sent['to']}: {note}\n" for note in notes)
    write_atomic(out, answer + "\n")
    title = f"Response to Reply #{n}"
    if f"## {title}\n" not in (d / "thread.md").read_text(encoding="utf-8"):
        conv.append(d / "thread.md", title, answer)
    conv.remove_new_markers(d / "thread.md")
    f.unlink(missing_ok=True)
    return out


def respond(app: App, d: Path, say: Callable[[str], None], backend: str | None = None) -> Path | None:
    """One session: answer every NEW reply in one run of the role — its transaction (the reply is
    staged and sent only when the run commits; a failed or killed session sends nothing and its
    replies wait for the next), on agentd's books — then record it and drop the lock."""
    sent = json.loads((d / ".sent").read_text())
    role = app.roster.roles[sent["role"]]
    try:
        finish_answer(app, d)  # a committed answer a crash left unrecorded
        n = conv.max_reply(d / "responses")
        if n <= conv.max_response(d / "responses"):
            return None
        answer: dict[str, object] = {}

        def stage(result: RunResult, run: Transport) -> RunResult:
            text, notes = split_memory(result.summary)
            if not text:
                return result._replace(ok=False, error="the answer was only memory lines: nothing to send")
            mid = make_message_id(role.name, app.config.domain)
            raw = _reply_bytes(app, sent, conv.reply_chain(d), text, mid)
            run.send(raw, app.roster.address(role.name), [sent["to"]])
            answer.update(n=n, mid=mid, answer=text, notes=notes)
            return result

        def committing() -> None:  # from here the reply goes out: a reply to it belongs here
            conv.add_id(d, str(answer["mid"]))
            write_atomic(_answer_file(d), json.dumps(answer))

        transport = make_transport(app.config, app.deliverer)
        ask = Ask(prompt(app, d), stage, committing)
        try:
            done = bridged.run(
                app,
                "reply",
                d.name,
                role.name,
                lambda: run_role(app, role.name, transport=transport, echo=say, backend=backend, ask=ask),
                say=say,
            )
        except WorkflowError as e:
            done = bridged.Bridged(None, None, "")
            error = str(e)
        else:
            error = done.report.error if done.report is not None else ""
        if done.waits or (done.outcome is not None and done.outcome.busy):
            say(f"session not started: {done.waits or 'the role is busy'}; the replies wait for a later poll")
            return None
        if done.report is None or not done.report.ok:
            count = note_failure(d, error or "the session failed")
            say(f"session failed ({count} in a row): {error}; the replies wait (back-off) for a later poll")
            return None
        out = finish_answer(app, d)
        _failures_file(d).unlink(missing_ok=True)
        say(f"answered replies up to #{n}")
        return out
    finally:
        lock = lock_path(d)
        try:
            holder = int(json.loads(lock.read_text(encoding="utf-8"))["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            holder = 0
        if holder in (os.getpid(), os.getppid()):
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
