"""Told: whoever asked for the work hears when it reaches done, once.

When a role's committed move (``artifacts.movers``) puts an artifact in done/, agentd finds who
asked for it: the sender of the first mail about the artifact, when that is a person (a human role,
``user`` included). Unless that person already got mail about the artifact since the move (the
implementer's own note, say), agentd sends them one ``status-update`` from the mover: "done". Each
move is judged once (the task store remembers it, across restarts), and only moves made after
agentd first looked, so an old project's history is never announced. While the mover's run is
still going, agentd waits for it: the run may tell the person itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import attrgetter

from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.app import App
from workflow.artifacts.board import mail_by_key
from workflow.artifacts.gitrepo import Repo
from workflow.artifacts.movers import last_moves
from workflow.core.errors import WorkflowError
from workflow.core.locate import scan
from workflow.core.senders import local_part
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport

SINCE = "told-since"  # the mark: moves into done/ from this time on are told


class Told:
    """One project's "it is done" notes; ``step`` sends those due."""

    def __init__(self, app: App, tasks: Tasks, log: Callable[..., None]) -> None:
        self.app, self.tasks, self.log = app, tasks, log
        self.judged: set[tuple[str, str, int]] = set()  # (root, name, move time) judged in this process
        self.seen: object = None  # git's reflog as the last step found it, when nothing waited

    def step(self, transport: Callable[[], Transport], now: int) -> int:
        """Tell the requesters of artifacts newly in done/; returns how many were told."""
        since = self.tasks.mark(SINCE)
        if since is None:
            self.tasks.set_mark(SINCE, now)
            return 0
        seen = self._reflog()
        if seen is not None and seen == self.seen:
            return 0  # no commit since the last look, and no move waiting on its run
        self.seen = seen
        due = [
            (key, mv)
            for key, mv in last_moves(self.app.config).items()
            if mv.state == "done" and mv.time >= since and (*key, mv.time) not in self.judged
        ]
        if not due:
            return 0
        live = {t.role for t in self.tasks.list((TaskStatus.QUEUED, TaskStatus.RUNNING))}
        artifacts = scan(self.app.config)
        with self.app.index() as index:
            index.refresh()
            mail = mail_by_key(self.app.config, index.with_artifacts(), artifacts)
        where = {a.key: a for a in artifacts if a.state == "done"}
        told = 0
        for key, mv in due:
            tag = f"told:{key[0]}/{key[1]}@{mv.time}"
            if mv.role in live:
                self.seen = None  # look again at the next step
                continue  # its run may tell the person itself: judged when it has ended
            self.judged.add((*key, mv.time))
            if self.tasks.mark(tag) is not None or key not in where:
                continue
            self.tasks.set_mark(tag, now)
            rows = sorted(mail.get(key, []), key=attrgetter("date", "key"))
            requester = self._person(rows[0].sender) if rows else None
            if requester is None:
                continue  # no person asked for it (a role started its thread)
            address = self.app.roster.address(requester)
            if any(r.date >= mv.time and (r.mailbox == requester or address in r.recipients) for r in rows):
                continue  # told already since the move
            artifact = where[key]
            sender = mv.role if mv.role in self.app.roster.identities() else self.app.config.agentd.escalate_to
            variables = {
                "STATUS": "done",
                "CONTEXT": f"{artifact.path} reached done/ (moved by {mv.role}); you asked for it (told by agentd)",
            }
            try:
                c = self.app.compose(
                    NotifyRequest("status-update", (artifact.path,), (requester,), sender, None, variables)
                )
                c.send(transport())
            except WorkflowError as e:
                self.log("told-failed", artifact=artifact.path, to=requester, why=str(e)[:300])
                continue
            self.log("told", artifact=artifact.path, to=requester, message_id=c.message_id)
            told += 1
        return told

    def _reflog(self) -> tuple[int, int] | None:
        """HEAD's reflog (size, mtime): every commit changes it; None when it cannot be read."""
        try:
            repo = Repo.find(self.app.config)
            st = os.stat(repo.git_dir / "logs" / "HEAD") if repo is not None else None
        except (OSError, WorkflowError):
            return None
        return (st.st_size, st.st_mtime_ns) if st is not None else None

    def _person(self, sender: str | None) -> str | None:
        """The human role behind a sender address, or None."""
        name = local_part(sender or "", self.app.config.domain)
        role = self.app.roster.roles.get(name) if name and name in self.app.roster.roles else None
        return name if role is not None and role.mode == "human" else None
