"""Slack settings: ``[bridges.slack]``, declared once as its record.

Every field is ``Annotated[type, Spec] = default`` (``core.schema``); ``SECTION`` is what the
composition root registers (``bridges.sections``), so core names no bridge. The bridge schedules
no run: how long a role may take, which backend runs it, how often a failure is retried and who
hears of it are ``[agentd]``'s, so the keys it once had for them are refused with that hint.
"""

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, NamedTuple

from workflow.core.schema import NAME_RE, Int, NameTable, Num, Plugin, Section, Str

CHANNEL = re.compile(r"^(#?[a-z0-9][a-z0-9._-]{0,79}|[CGD][A-Z0-9]{2,})?$")
AGENTD = "agentd runs the roles the bridge asks"
MOVED = {
    "timeout": f"{AGENTD}: set [agentd] timeout, or role_timeouts = {{ ROLE = SECONDS }}",
    "timeouts": f"{AGENTD}: set [agentd] role_timeouts = {{ ROLE = SECONDS }} for the intents' roles",
    "max_concurrent": f"{AGENTD}: set [agentd] max_concurrent",
    "backend": f"{AGENTD}: set the role's backend (roles/ROLE.md), or [agentd] backend",
}


class SlackConfig(NamedTuple):
    signing_secret_env: Annotated[str, Str()] = "SLACK_SIGNING_SECRET"
    bot_token_env: Annotated[str, Str()] = "SLACK_BOT_TOKEN"
    app_token_env: Annotated[str, Str()] = "SLACK_APP_TOKEN"  # Socket Mode's app-level token (xapp-…)
    # socket | http | auto: Socket Mode when the app token is set, else HTTP
    mode: Annotated[str, Str(choices=("auto", "socket", "http"))] = "auto"
    api_base_url: Annotated[str, Str(re.compile(r"^https?://"))] = "https://slack.com/api/"
    host: Annotated[str, Str()] = "127.0.0.1"
    port: Annotated[int, Int(0, 65535)] = 3000
    max_body: Annotated[int, Int(1024, 64 << 20)] = 1 << 20  # HTTP mode: a larger request gets 413
    request_timeout: Annotated[float, Num(0.1, 3600)] = 10.0  # HTTP mode: a connection idle this long is closed
    max_connections: Annotated[int, Int(1, 10000)] = 100  # HTTP mode: connections open at once
    # HTTP mode: a request must arrive whole (headers and body) within this
    read_timeout: Annotated[float, Num(0.1, 3600)] = 5.0
    max_per_peer: Annotated[int, Int(1, 10000)] = 16  # HTTP mode: connections one peer address may hold at once
    # watch only this channel ("#argus-inbox" or an id); empty: every channel
    channel: Annotated[str, Str(CHANNEL)] = ""
    bot_user_id: Annotated[str, Str()] = ""
    default_role: Annotated[str, Str(NAME_RE)] = "coordinator"
    roles: Annotated[Mapping[str, str], NameTable()] = MappingProxyType({})  # intent → role
    artifact: Annotated[str, Str()] = "specs/*/slack-inbox.md"
    model: Annotated[str, Str()] = "claude-haiku-4-5-20251001"


SECTION = Plugin("bridges", "slack", Section(SlackConfig, moved=MOVED))
