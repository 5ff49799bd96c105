"""Gmail's ``Bridge`` (``bridges.base``): its cycle loop, and the outbound drain for mail leaving the domain."""

from __future__ import annotations

import threading

from workflow.app import App
from workflow.bridges.base import Say
from workflow.bridges.gmail.bridge import run, settings, submit_outbound
from workflow.bridges.gmail.settings import GmailConfig


class Gmail:
    name = "gmail"
    about = "IMAP in (labels, agents, the reply loop), SMTP out for mail leaving the domain"

    def configured(self, app: App) -> bool:
        return app.config.section(GmailConfig) is not None

    def run(self, app: App, say: Say, stop: threading.Event) -> None:
        run(app, settings(app), say, stop.is_set)

    def outbound(self, app: App, say: Say, dry_run: bool = False) -> int | None:
        s = settings(app)
        return submit_outbound(app, s, say, dry_run) if s.outbound else None


BRIDGE = Gmail()
