"""Gmail settings: ``[bridges.gmail]`` and its agents' sections, each declared once as its record.

Every field is ``Annotated[type, Spec] = default`` (``core.schema``); ``SECTION`` is what the
composition root registers (``bridges.sections``), so core names no bridge.
"""

import re
from types import MappingProxyType
from typing import Annotated, NamedTuple

from workflow.core.schema import NAME_RE, Bool, Int, Num, Owned, Plugin, Section, Str, Tables

DAY = 86400.0
WORD = re.compile(r"^\S+$")


class ForwarderConfig(NamedTuple):
    """``[bridges.gmail.agents.todo_forwarder]``."""

    enabled: Annotated[bool | None, Bool()] = None  # unset: on once ``email`` is set (docs/bridges.md)
    email: Annotated[str, Str()] = ""  # missing → the agent says "not configured"
    debug: Annotated[bool, Bool()] = False
    dry_run: Annotated[bool, Bool()] = False


class GmailAgents(NamedTuple):
    """``[bridges.gmail.agents]``: one field per agent section in ``AGENTS``."""

    todo_forwarder: ForwarderConfig = ForwarderConfig()


AGENTS: Tables[GmailAgents] = Tables(
    "agent", MappingProxyType({"todo_forwarder": Section(ForwarderConfig)}), lambda r: GmailAgents(**r)
)


class GmailConfig(NamedTuple):
    imap_host: Annotated[str, Str(WORD)]
    user: Annotated[str, Str(WORD)]
    imap_port: Annotated[int, Int(1, 65535)] = 993
    imap_tls: Annotated[bool, Bool()] = True
    password_env: Annotated[str, Str()] = ""
    password_file: Annotated[str, Owned("file", secret=True)] = ""
    xoauth2_command: Annotated[str, Owned("command")] = ""
    role: Annotated[str, Str(NAME_RE)] = "user"
    poll_interval: Annotated[float, Num(0.1, DAY)] = 60.0
    idle: Annotated[bool, Bool()] = True
    archive_folder: Annotated[str, Str()] = ""  # unset: the server's special-use \\Archive folder, else "Archive"
    classify: Annotated[bool, Bool()] = True
    model: Annotated[str, Str()] = "claude-haiku-4-5"
    dry_run: Annotated[bool, Bool()] = False
    outbound: Annotated[bool, Bool()] = False
    smtp_host: Annotated[str, Str()] = ""
    smtp_port: Annotated[int, Int(1, 65535)] = 587
    smtp_tls: Annotated[str, Str(choices=("starttls", "ssl", "none"))] = "starttls"
    relay_host: Annotated[str, Str()] = ""  # where agents send (forwards); default the project's own server
    relay_port: Annotated[int, Int(0, 65535)] = 0
    agents: Annotated[GmailAgents, AGENTS] = GmailAgents()


SECTION = Plugin("bridges", "gmail", Section(GmailConfig))
