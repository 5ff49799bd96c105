"""Gmail's ``Bridge`` (``bridges.base``): its section, its cycle loop, and the outbound drain for
mail leaving the domain. Light to import (the registry, ``bridges.sections``, is read at every
command's start): the bridge itself is imported when it runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from workflow.bridges.base import Say
from workflow.bridges.gmail import settings as gmail_settings
from workflow.core.schema import Plugin

if TYPE_CHECKING:  # light to import: the registry is read at every command's start
    from workflow.app import App


class Gmail:
    name = "gmail"
    about = "IMAP in (labels, agents, the reply loop), SMTP out for mail leaving the domain"
    section: Plugin = gmail_settings.SECTION

    def configured(self, app: App) -> bool:
        return app.config.section(gmail_settings.GmailConfig) is not None

    def run(self, app: App, say: Say, stop: threading.Event) -> None:
        from workflow.bridges.gmail.bridge import run, settings  # lazy: start-up time; only a running bridge needs it

        run(app, settings(app), say, stop.is_set)

    def outbound(self, app: App, say: Say, dry_run: bool = False) -> int | None:
        from workflow.bridges.gmail.bridge import settings, submit_outbound  # lazy: as above

        s = settings(app)
        return submit_outbound(app, s, say, dry_run) if s.outbound else None


BRIDGE = Gmail()
