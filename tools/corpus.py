"""Corpus: generate realistic workflow mail straight into Maildirs, for benchmarks and tests.

Threads of 1–12 messages between roles about one artifact each, with the headers workflow-notify
writes, a share of them unread (new/) and the rest read (cur/ with S). Files are written without
fsync: a generated corpus is scratch data, not mail anyone is waiting for.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from workflow.mail.message import Draft, build, reply_subject

ROLES = (
    "spec-writer",
    "spec-reviewer",
    "skeleton-writer",
    "skeleton-reviewer",
    "test-writer",
    "test-reviewer",
    "implementer",
    "implementation-reviewer",
    "coordinator",
    "platform-lead",
    "vision-writer",
    "vision-reviewer",
    "scope-writer",
    "scope-reviewer",
    "roadmap-writer",
    "roadmap-reviewer",
    "implementation-writer",
    "user",
    "spec-reviewer-panel.claude",
    "spec-reviewer-panel.gpt-5",
)
FIRST = ("review-request", "question", "blocker-report", "status-update")
REPLY = ("clarification-request", "answer", "approval", "rejection", "status-update", "question", "answer")
STATES = ("proposed", "todo", "doing", "blocked", "done")
WORDS = (
    "token refresh session error handling retry backoff schema migration index cache latency budget "
    "interface adapter async boundary review finding coverage edge case timeout lock queue batch "
    "owner rollout flag metric alert audit password oauth scope consent revoke expire"
).split()


@dataclass(frozen=True)
class CorpusStats:
    messages: int
    threads: int
    unread: int
    files: int


def _body(rng: random.Random, n_lines: int) -> str:
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(n_lines)) + "\n"


def generate(
    root: Path,
    messages: int,
    *,
    mailboxes: tuple[str, ...] = ROLES,
    seed: int = 42,
    unread_share: float = 0.25,
    domain: str = "workflow.local",
    artifacts: int = 500,
    missing_parent_share: float = 0.0,
) -> CorpusStats:
    """Write ``messages`` messages into ``root/<mailbox>`` Maildirs; returns what was written."""
    rng = random.Random(seed)
    for mb in mailboxes:
        for sub in ("tmp", "new", "cur"):
            os.makedirs(root / mb / sub, exist_ok=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    written = threads = unread = files = 0
    serial = 0
    while written < messages:
        threads += 1
        size = min(rng.randint(1, 12), messages - written)
        art = f"specs/*/auth-{rng.randrange(artifacts):03d}.md"
        parties = rng.sample(mailboxes, 2)
        chain: list[str] = []
        subject = ""
        t = start + timedelta(seconds=rng.randrange(300 * 24 * 3600))
        drop = rng.random() < missing_parent_share and size > 2
        for i in range(size):
            serial += 1
            sender, rcpt = parties[i % 2], parties[(i + 1) % 2]
            sender_local = sender.split(".")[-1] if "." in sender else sender
            mid = f"<{t.strftime('%Y%m%d%H%M%S')}.{serial:012x}.{sender_local}@{domain}>"
            event = rng.choice(FIRST) if i == 0 else rng.choice(REPLY)
            if i == 0:
                subject = f"[{event.upper().replace('-', ' ')}] {art.rsplit('/', 1)[-1][:-3]}"
            raw = build(
                Draft(
                    sender=f"{sender}@{domain}",
                    to=[f"{rcpt}@{domain}"],
                    subject=subject if i == 0 else reply_subject(subject),
                    body=_body(rng, rng.randint(4, 10)),
                    message_id=mid,
                    event=event,
                    state=rng.choice(STATES),
                    artifacts=[art],
                    in_reply_to=chain[-1] if chain else None,
                    references=list(chain),
                    date=t,
                )
            )
            chain.append(mid)
            t += timedelta(minutes=rng.randint(1, 600))
            written += 1
            if drop and i == 1:
                continue  # referenced by later replies but never delivered: a missing parent
            is_unread = rng.random() < unread_share
            unread += is_unread
            name = f"{int(t.timestamp())}.M{serial}P1R{serial:016x}.corpus"
            path = root / rcpt / ("new" if is_unread else "cur") / (name if is_unread else name + ":2,S")
            with open(path, "wb") as f:
                f.write(raw)
            files += 1
    return CorpusStats(written, threads, unread, files)
