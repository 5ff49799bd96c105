"""App: the composition root — the objects an entry point builds once and passes down.

Config is loaded at the edge; the roster, the Maildirs and the deliverer are built from it on
first use, and ``index()`` opens a short-lived index connection. Every layer above delivery
(artifacts, agents, agentd, panels, bridges, ops, cli) takes an ``App``; nothing reaches for
globals.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from workflow.core.config import Config, Plugin, load_config
from workflow.mail.index import Index
from workflow.mail.maildir import Maildirs
from workflow.policy.guardrails import History, switches
from workflow.policy.roster import Roster

if TYPE_CHECKING:
    from workflow.delivery.deliverer import Deliverer
    from workflow.delivery.notify import Composed, NotifyRequest, Parent


class App:
    """Config plus what is built from it on first use."""

    def __init__(self, config: Config, parent: Parent | None = None, history: History | None = None) -> None:
        switches(config)  # refuses a [guardrails] name no rule has
        self.config = config
        self.parent = parent  # threads replies without the index (an agent inside a run has none)
        self.history = history  # read from git by the layer above (artifacts.movers): guardrails.History

    @classmethod
    def load(
        cls,
        config_path: Path | None = None,
        mail_root: Path | None = None,
        cwd: Path | None = None,
        parent: Parent | None = None,
        plugins: tuple[Plugin, ...] = (),
        history: History | None = None,
    ) -> App:
        """The App of the nearest (or the given) workflow.toml; ``plugins`` are the sections the
        entry point registers (``bridges.sections.SECTIONS``), ``history`` where committed moves say
        an artifact was before (``artifacts.movers.stay``): this layer names neither."""
        return cls(load_config(config_path, mail_root=mail_root, cwd=cwd, plugins=plugins), parent, history)

    @cached_property
    def roster(self) -> Roster:
        return Roster.load(self.config)

    @cached_property
    def maildirs(self) -> Maildirs:
        return Maildirs(self.config.mail_root)

    @cached_property
    def deliverer(self) -> Deliverer:
        # lazy: start-up time — reading commands (inbox, thread, status) never deliver
        from workflow.delivery.deliverer import Deliverer

        return Deliverer(self.config, self.roster, self.maildirs, self.history)

    def save_snapshot(self, loaded_at_ns: int) -> bool:
        """Save what the short commands need of this project (``core.snapshot.Facts``): where its
        mail and index are, its states and events, what each identity may see, and its server's
        socket — valid while the config, the roles and the mail root's owner file are unchanged."""
        from workflow.core import snapshot  # lazy: only the short commands save a snapshot
        from workflow.delivery import credentials
        from workflow.policy.roles import role_sources

        c = self.config
        if c.path is None:
            return False
        sources = [str(c.path), str(c.state.project), *(str(p) for p in role_sources(c))]
        roster = self.roster
        facts = snapshot.Facts(
            mail_root=str(c.mail_root),
            index_path=str(c.index_path),
            domain=c.domain,
            project_dir=str(c.project_dir),
            states=tuple(c.states),
            event_types=tuple(c.event_types),
            artifact_roots=tuple(c.artifact_roots),
            views={name: roster.view(name) for name in {*roster.roles, *roster.members, *roster.panels}},
            default_sender=c.default_sender,
            socket=str(c.state.socket),
            timeout=float(c.smtp.timeout),
            login=credentials.owner_login(c.mail_root),
        )
        return snapshot.save(str(c.path), os.environ, sources, facts, loaded_at_ns)

    def index(self) -> Index:
        """A new connection to the index; use it as a context manager and keep it short-lived."""
        return Index(self.config.index_path, self.maildirs, self.config.domain)

    def compose(self, req: NotifyRequest) -> Composed:
        """The message for one notification (the index threads a reply onto its parent)."""
        from workflow.delivery.notify import compose, parent_in  # lazy: start-up time, as for deliverer

        if self.parent is not None:
            return compose(req, self.config, self.roster, self.parent)
        with self.index() as index:
            return compose(req, self.config, self.roster, parent_in(index))
