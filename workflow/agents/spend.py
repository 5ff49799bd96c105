"""Spend: what a bridge's own model calls cost (its classifier's), against an account's daily budget.

A bridge that asks a model itself — to classify a Slack request or a forwarded mail — ``book``s the
call's tokens against an account of its own (``slack-classifier``, ``gmail-classifier``) and asks
``spent`` before the next call: past ``[agentd] role_budgets[account]`` (or ``daily_tokens``) it
falls back to keywords for the rest of the day. The counts live in their own store
(``StateDir.spend``), apart from agentd's; ``agentd status`` lists them with the roles' tokens.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from workflow.app import App
from workflow.core.db import open_db
from workflow.core.statedir import StateDir

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens(account TEXT NOT NULL, day TEXT NOT NULL, tokens INTEGER NOT NULL,
  PRIMARY KEY(account, day));
"""


def _day() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def book(app: App, account: str, usage: Mapping[str, int]) -> None:
    """Count a model call's input and output tokens against ``account`` for today."""
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    if not tokens:
        return
    db = open_db(app.config.state.spend, what="bridges' token store", schema=SCHEMA)
    try:
        db.execute(
            "INSERT INTO tokens(account, day, tokens) VALUES (?, ?, ?) "
            "ON CONFLICT(account, day) DO UPDATE SET tokens=tokens+excluded.tokens",
            (account, _day(), tokens),
        )
    finally:
        db.close()


def today(state: StateDir) -> dict[str, int]:
    """Each account's tokens today (none before any call was booked)."""
    if not state.spend.exists():
        return {}
    db = open_db(state.spend, what="bridges' token store", schema=SCHEMA)
    try:
        return {str(a): int(t) for a, t in db.execute("SELECT account, tokens FROM tokens WHERE day=?", (_day(),))}
    finally:
        db.close()


def spent(app: App, account: str) -> str:
    """Why ``account`` may not call the model today ("" while its daily token budget lasts)."""
    opts = app.config.agentd
    limit = int(opts.role_budgets.get(account, opts.daily_tokens))
    if not limit:
        return ""
    used = today(app.config.state).get(account, 0)
    return f"{account} spent its daily token budget ({used} > {limit})" if used > limit else ""
