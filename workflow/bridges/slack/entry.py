"""Slack's ``Bridge`` (``bridges.base``): its section, and the inbox agent until told to stop (its
loop also posts the answers in its mailbox); it sends no mail out of the domain. Light to import (the registry, ``bridges.sections``, is read at every command's
start): the bridge itself is imported when it runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from workflow.bridges.base import Say
from workflow.bridges.slack import settings as slack_settings
from workflow.core.schema import Plugin

if TYPE_CHECKING:  # light to import: the registry is read at every command's start
    from workflow.app import App


class Slack:
    name = "slack"
    about = "Slack requests in as workflow mail to a role (agentd runs it), its answers back to the thread"
    section: Plugin = slack_settings.SECTION

    def configured(self, app: App) -> bool:
        return app.config.section(slack_settings.SlackConfig) is not None

    def run(self, app: App, say: Say, stop: threading.Event) -> None:
        # lazy: start-up time; only a running bridge needs them
        from workflow.bridges.slack.bridge import Bridge, configured
        from workflow.bridges.slack.receive import serve

        s, keys = configured(app)
        b = Bridge(app, s, keys, say)

        def relay() -> None:
            stop.wait()
            b.stopping.set()
            b.wake.set()

        threading.Thread(target=relay, name="slack-stop", daemon=True).start()
        serve(b, say)

    def outbound(self, app: App, say: Say, dry_run: bool = False) -> int | None:
        return None


BRIDGE = Slack()
