"""Live: notices when what the pages show has changed — mail delivered or read, an artifact moved,
a run started or ended, a panel's state — so open pages update without a reload.

``Stamp`` is a cheap fingerprint of the places that change: each mailbox's ``new/`` and ``cur/``
directory, each state folder under each artifact root, and agentd's and the panels' stores (and
their write-ahead logs). ``Watch`` compares it every ``period`` seconds (a few hundred ``stat``
calls); on a change it refreshes the index once and bumps its version, which every open event
stream waits on. Nothing about a page's content travels here: each stream renders its own page
for its own viewer (``server``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from workflow.app import App
from workflow.core.errors import WorkflowError

log = logging.getLogger(__name__)

PERIOD = 0.1  # seconds between looks (a look is ~50 stats): an event reaches an open page well within a second


def _stat(path: str | Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def stamp(app: App) -> tuple[tuple[int, int], ...]:
    """What changes when anything a page shows changes."""
    cfg = app.config
    out: list[tuple[int, int]] = []
    try:
        boxes = sorted(e.name for e in os.scandir(cfg.mail_root) if not e.name.startswith("."))
    except OSError:
        boxes = []
    for b in boxes:
        for sub in ("new", "cur"):
            out.append(_stat(os.path.join(cfg.mail_root, b, sub)))
    for root in cfg.artifact_roots:
        for folder in cfg.states:
            out.append(_stat(cfg.project_dir / root / folder))
    sd = cfg.state
    for db in (sd.tasks, sd.panels):
        for suffix in ("", "-wal"):
            out.append(_stat(f"{db}{suffix}"))
    out.append(_stat(sd.agentd_log))
    out.append((len(boxes), 0))
    return tuple(out)


class Watch:
    """One loop per server: ``version`` grows each time the stamp changes."""

    def __init__(
        self,
        app: App,
        period: float = PERIOD,
        refresh: Callable[[], None] | None = None,
        before: Callable[[], None] = lambda: None,
    ) -> None:
        self.app = app
        self.before = before  # asked first at each look (the server takes the project's files fresh)
        self.period = period
        self.version = 0
        self.changed = asyncio.Condition()
        self.refresh = refresh or self._refresh
        self.last = stamp(app)

    def _refresh(self) -> None:
        with self.app.index() as index:
            index.refresh()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                self.before()
                now = await asyncio.to_thread(stamp, self.app)
                if now == self.last:
                    continue
                self.last = now
                await asyncio.to_thread(self.refresh)
            except (WorkflowError, OSError, sqlite3.Error) as e:  # an index busy or mended: try again at the next look
                log.warning("live updates: %s", e)
                continue
            async with self.changed:
                self.version += 1
                self.changed.notify_all()

    async def wait(self, seen: int, timeout: float) -> int:
        """The version after ``seen`` (or ``seen`` again after ``timeout`` seconds with no change)."""
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: self.version != seen), timeout)
            except TimeoutError:
                pass
            return self.version
