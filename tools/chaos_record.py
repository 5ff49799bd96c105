"""Chaos record: what a played schedule left behind — the chaos agent's log, agentd's log, the Maildirs, live processes.

The chaos agent logs every attempt (what it was handed, what it sent, how it ended); agentd's
JSON log says which run-role each task started and which it saw complete; every stored copy in
every mailbox says what was delivered, and to whom.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path
from typing import NamedTuple

from tools.chaos_agent import MARKER
from workflow.mail.message import parse

ATTEMPT_RE = re.compile(r"answered by (\S+)")


class Attempt(NamedTuple):
    id: str
    role: str
    handed: tuple[str, ...]
    behavior: str
    run_role: int  # the pid of the run-role whose agent this was
    end: str | None  # ok | fail | None (hung past its timeout, or killed)
    sent: tuple[str, ...]  # Message-IDs of the answers it sent (staged in its run)


class Stored(NamedTuple):
    mailbox: str
    message_id: str
    sender: str  # the sending role
    in_reply_to: str
    attempt: str  # the chaos attempt named in the body ("" for other mail)


def record(chaos: Path) -> tuple[dict[str, Attempt], list[dict[str, object]]]:
    """Every attempt of the chaos agent, and the violations it saw as it started."""
    entries = []
    for line in (chaos / "log.jsonl").read_text().splitlines() if (chaos / "log.jsonl").exists() else []:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    starts = {e["attempt"]: e for e in entries if "behavior" in e}
    ends = {e["attempt"]: str(e["end"]) for e in entries if "end" in e}
    sent: dict[str, list[str]] = {}
    for e in entries:
        if "sent" in e:
            sent.setdefault(str(e["attempt"]), []).append(str(e["sent"]))
    attempts = {
        a: Attempt(
            a,
            str(e["role"]),
            tuple(e["handed"]),
            str(e["behavior"]),
            int(e.get("run_role_pid") or 0),
            ends.get(a),
            tuple(sent.get(a, ())),
        )
        for a, e in starts.items()
    }
    return attempts, [e for e in entries if "violation" in e]


def stored(project: Path) -> list[Stored]:
    """Every copy in every mailbox (new/ and cur/)."""
    out = []
    root = project / "mail"
    for box in sorted(root.iterdir()) if root.is_dir() else []:
        if box.name.startswith(".") or not box.is_dir():
            continue
        for sub in ("new", "cur"):
            for f in sorted((box / sub).iterdir()) if (box / sub).is_dir() else []:
                try:
                    raw = f.read_bytes()
                except FileNotFoundError:
                    continue  # moved from new/ to cur/ while listed: found again there or next time
                m = parse(raw)
                found = ATTEMPT_RE.search(raw[m.body_offset :].decode("utf-8", "replace"))
                out.append(
                    Stored(
                        box.name,
                        m.message_id or "",
                        (m.get("From") or "").split("<")[-1].split("@")[0].strip(),
                        m.in_reply_to or "",
                        found.group(1) if found else "",
                    )
                )
    return out


def answers(project: Path) -> list[Stored]:
    return [s for s in stored(project) if s.mailbox == "user" and s.attempt]


def answered_pairs(project: Path) -> set[tuple[str, str]]:
    """(role, Message-ID) of every answer delivered to user."""
    return {(a.sender, a.in_reply_to) for a in answers(project)}


def completed_runs(project: Path) -> set[int]:
    """The run-role pids whose task agentd saw complete (after a restart too: the task's last start)."""
    log = project / "mail" / ".workflow" / "agentd.jsonl"
    last: dict[int, int] = {}
    done: set[int] = set()
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "started" and "task" in e:
            last[int(e["task"])] = int(e["pid"])
        elif e.get("event") == "completed" and e.get("ran", True) and int(e.get("task", -1)) in last:
            done.add(last[int(e["task"])])
    return done


def held(path: Path) -> bool:
    """Whether some process still holds the flock on ``path``."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def escapees(tag: str) -> list[int]:
    """Live processes carrying this schedule's escapee marker (host pids, whatever namespace they are in)."""
    marker = f"{MARKER}-{tag}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().split(b"\0"):
                    stat = (d / "stat").read_text()
                    if stat[stat.rfind(")") + 2] != "Z":
                        out.append(int(d.name))
            except OSError:
                continue
    return out
