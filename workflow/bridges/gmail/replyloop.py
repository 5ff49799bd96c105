"""Reply loop (docs/bridges.md): a correspondent's replies asked of the conversation's role, its answer sent back.

The conversation's files are ``conversation.py``'s. The bridge schedules nothing: when a
conversation has replies not yet answered and no question outstanding, ``ask`` sends one
``question`` mail to the conversation's role, From the conversation's own address
(``gmail+<hash>@``) and carrying ``X-Workflow-Conversation: <id>``. agentd runs the role on it
as on any mail (its retries, timeouts and budgets); the role's context builder reads the
conversation's thread.md, research files and memory for it (``agents.asked.material``), and its
finish summary comes back as an ``answer`` to the bridge's mailbox. ``answered`` takes it: the
``MEMORY:`` lines go to memory.txt, the rest is sent to the correspondent as the role, threaded
(In-Reply-To the last reply, References the whole chain), and recorded — ``NN-response.md``,
thread.md without NEW markers. Each step is recorded before it is done (``.asked.json`` holds the
question's bytes, ``.answer.json`` the reply's), so a crash resends the same bytes (stored once)
and records once. A conversation whose role gave up (agentd's blocker-report) waits for a new
reply; replies that came during a run are asked next.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workflow.agents.asked import CONVERSATION_HEADER, MEMORY_MARK, REPLIES_HEADER
from workflow.app import App
from workflow.bridges import answers
from workflow.bridges.gmail import conversation as conv
from workflow.core.files import write_atomic
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport, make_transport
from workflow.mail.message import Draft, build, make_message_id, reply_subject

NAME = "gmail"
Say = Callable[[str], None]


def address(d: Path) -> str:
    """The bridge address (local part) a conversation's questions come from: ``gmail+<12 hex>``."""
    return f"{NAME}+{hashlib.sha256(d.name.encode()).hexdigest()[:12]}"


def _asked_file(d: Path) -> Path:
    return d / "responses" / ".asked.json"


def _answer_file(d: Path) -> Path:
    return d / "responses" / ".answer.json"


def asked(d: Path) -> dict[str, Any]:
    """The conversation's outstanding question ({} for none): its Message-ID, bytes, the highest
    reply it asks about, whether it was sent, whether the role gave up on it."""
    try:
        data = json.loads(_asked_file(d).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def answerable(app: App, role: str) -> str:
    """Why agentd would not answer a conversation of ``role`` ("" when it would)."""
    r = app.roster.roles.get(role)
    if r is None:
        return f"{role!r} is no role here"
    if r.mode != "async":
        return f"{role} is a {r.mode} role: its correspondent's replies are in its inbox, for a person to answer"
    watched = app.config.agentd.roles
    if watched and role not in watched:
        return f"[agentd] roles does not list {role}"
    return ""


def ask(app: App, d: Path, transport: Transport, say: Say) -> bool:
    """Ask the conversation's role about its replies not yet answered, unless a question is
    outstanding (or its role gave up and no reply came since); True when a question was sent."""
    replies = d / "responses"
    n = conv.max_reply(replies)
    if n <= conv.max_response(replies):
        return False
    q = asked(d)
    if q and (not q.get("failed") or n <= int(q.get("n", 0))):
        if q.get("raw") and not q.get("sent"):
            _send(d, q, transport)  # recorded, then a crash: the same bytes again
        return False
    sent = json.loads((d / ".sent").read_text())
    role = str(sent["role"])
    why = answerable(app, role)
    if why:
        if q.get("refused") != why:
            write_atomic(_asked_file(d), json.dumps({"n": n, "failed": True, "refused": why}))
            say(f"conversation {d.name}: not asked: {why}")
        return False
    first = conv.max_response(replies) + 1
    which = f"#{n}" if first == n else f"#{first}–#{n}"
    req = NotifyRequest(
        "question",
        (app.config.any_artifact,),
        (role,),
        address(d),
        None,
        {
            "QUESTION": f'{sent["to"]} replied ({which}) to your mail "{sent["subject"]}": answer them',
            "CONTEXT": f"the Gmail bridge's conversation {d.name}; its thread and what you know follow",
        },
        ((CONVERSATION_HEADER, d.name), (REPLIES_HEADER, str(n))),
    )
    c = app.compose(req)
    q = {
        "n": n,
        "mid": c.message_id,
        "raw": base64.b64encode(c.raw).decode(),
        "sender": c.sender_address,
        "to": list(c.recipients),
        "sent": False,
    }
    write_atomic(_asked_file(d), json.dumps(q))
    _send(d, q, transport)
    say(f"conversation {d.name}: asked {role} about replies {which} ({c.message_id})")
    return True


def _send(d: Path, q: dict[str, Any], transport: Transport) -> None:
    transport.send(base64.b64decode(q["raw"]), str(q["sender"]), list(q["to"]))
    write_atomic(_asked_file(d), json.dumps({**q, "sent": True}))


def open_questions(app: App) -> dict[str, Path]:
    """Each outstanding question's Message-ID, and its conversation (read once per pass)."""
    base = app.config.state.conversations
    if not base.is_dir():
        return {}
    found = {str(asked(d).get("mid") or ""): d for d in sorted(base.iterdir()) if (d / ".sent").exists()}
    found.pop("", None)
    return found


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


def answered(app: App, transport: Transport, say: Say) -> int:
    """Take every answer in the bridge's mailbox: send each to its correspondent and record it;
    how many were sent."""
    sent = 0
    waiting = list(answers.waiting(app, NAME))
    questions = open_questions(app) if waiting else {}
    for a in waiting:
        d = questions.get(a.in_reply_to)
        if d is not None and asked(d).get("mid") != a.in_reply_to:
            d = None  # answered earlier in this pass: a second answer to one question sends nothing
        if d is None:
            say(f"{a.event or 'mail'} from {a.sender} answers no open question ({a.in_reply_to or 'none named'}); read")
        elif a.failed:
            write_atomic(_asked_file(d), json.dumps({**asked(d), "failed": True}))
            say(f"conversation {d.name}: {a.sender} could not answer ({a.text[:300]}); it waits for a new reply")
        else:
            sent += reply(app, d, a, transport, say)
        answers.done(app, a)
    return sent


def reply(app: App, d: Path, a: answers.Answer, transport: Transport, say: Say) -> int:
    """Send an answer to the correspondent as the role, in the thread, and record it; 1 when sent."""
    q = asked(d)
    text, notes = split_memory(a.text)
    if not text:
        write_atomic(_asked_file(d), json.dumps({**q, "failed": True}))
        say(f"conversation {d.name}: the answer was only memory lines, nothing to send; it waits for a new reply")
        return 0
    info = json.loads((d / ".sent").read_text())
    mid = make_message_id(info["role"], app.config.domain)
    raw = _reply_bytes(app, info, conv.reply_chain(d), text, mid)
    answer = {"n": int(q.get("n", conv.max_reply(d / "responses"))), "mid": mid, "text": text, "notes": notes}
    conv.add_id(d, mid)  # from here the reply goes out: a reply to it belongs here
    write_atomic(_answer_file(d), json.dumps({**answer, "raw": base64.b64encode(raw).decode()}))
    finish_answer(app, d, transport)
    say(f"conversation {d.name}: answered replies up to #{answer['n']}")
    return 1


def finish_answer(app: App, d: Path, transport: Transport | None = None) -> Path | None:
    """Send and record an answer (``.answer.json``): the reply out, ``NN-response.md``, the
    thread, the memory, then the question closed. Safe to repeat after a crash part-way."""
    f = _answer_file(d)
    try:
        a = json.loads(f.read_text(encoding="utf-8"))
        n, answer, notes = int(a["n"]), str(a["text"]), [str(x) for x in a["notes"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        f.unlink(missing_ok=True)  # not one we wrote whole: nothing it names was sent
        return None
    info = json.loads((d / ".sent").read_text())
    if a.get("raw"):
        (transport or make_transport(app.config, app.deliverer)).send(
            base64.b64decode(a["raw"]), app.roster.address(info["role"]), [info["to"]]
        )
    out = d / "responses" / f"{n:02d}-response.md"
    if notes and not out.exists():
        with open(conv.memory_file(app), "a", encoding="utf-8") as m:
            m.writelines(f"{info['to']}: {note}\n" for note in notes)
    write_atomic(out, answer + "\n")
    title = f"Response to Reply #{n}"
    if f"## {title}\n" not in (d / "thread.md").read_text(encoding="utf-8"):
        conv.append(d / "thread.md", title, answer)
    conv.remove_new_markers(d / "thread.md")
    _asked_file(d).unlink(missing_ok=True)
    f.unlink(missing_ok=True)
    return out


def loop(app: App, say: Say, dry: bool = False) -> None:
    """One pass of the reply loop: finish what a crash left, take the answers, ask what waits."""
    base = app.config.state.conversations
    if not base.is_dir():
        return
    transport = make_transport(app.config, app.deliverer)
    if not dry:
        for d in sorted(base.iterdir()):
            if _answer_file(d).exists():
                finish_answer(app, d, transport)
        answered(app, transport, say)
    for d in sorted(base.iterdir()):
        if (d / ".sent").exists() and conv.unprocessed(d / "responses"):
            if dry:
                say(f"dry-run: would ask about conversation {d.name}")
            else:
                ask(app, d, transport, say)


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
