"""Sections: the typed shape of every workflow.toml section — keys, types, defaults and limits.

Declared once, read once: ``config.load_config`` reads each table through ``schema.read``, so a
typo anywhere (``[agentd] max_concurent``) fails at load naming the file, the key and what was
expected, and the code that uses a section gets a typed NamedTuple, never a raw dict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from workflow.core import events
from workflow.core.addresses import member_mailbox, parse_panel
from workflow.core.backendkinds import BACKENDS, CLIS
from workflow.core.errors import ConfigError
from workflow.core.schema import (
    NAME_RE,
    BadValueError,
    Bool,
    Custom,
    EnvNames,
    Int,
    Names,
    NameTable,
    Num,
    NumTable,
    Section,
    Str,
    Strs,
    read,
    suggest,
    where,
)

DAY = 86400.0
EMPTY: Mapping[str, float] = MappingProxyType({})
DEFAULT_STATES = ("proposed", "todo", "doing", "blocked", "done")
DEFAULT_EVENTS = events.NAMES
DOMAIN_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
# BACKENDS and CLIS: the names declared in core.backendkinds (one Kind per backend)


AUTH_MODES = ("required", "off")


class SmtpConfig(NamedTuple):
    host: str = "127.0.0.1"
    port: int = 8025
    timeout: float = 60.0  # client: per connection; server: idle per command, and a whole DATA phase
    max_message_size: int = 10 * 1024 * 1024
    max_connections: int = 64
    auth: str = "required"  # required | off (trust-the-host: any local process may send as any role)
    auth_users_file: str = ""  # SMTP AUTH logins and the roles each may send as (delivery.credentials)
    login_timeout: float = 10.0  # server: seconds a connection has to log in (AUTH required)
    render_timeout: float = 10.0  # server: seconds a notification's template may take to render (XNOTIFY)
    tls_cert: str = ""  # STARTTLS for a non-loopback listener: PEM certificate chain …
    tls_key: str = ""  # … and its key


SMTP = Section(
    SmtpConfig,
    {
        "host": Str(),
        "port": Int(0, 65535),
        "timeout": Num(0.1, 3600.0),
        "max_message_size": Int(1024, 1 << 30),
        "max_connections": Int(1, 100_000),
        "auth": Str(choices=AUTH_MODES),
        "auth_users_file": Str(),
        "login_timeout": Num(0.1, 3600.0),
        "render_timeout": Num(0.1, 600.0),
        "tls_cert": Str(),
        "tls_key": Str(),
    },
)

SANDBOXES = ("bwrap", "none")


MODEL_ENV = (  # what the agent CLIs need to reach their models: never a bridge's secret
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
)


class RunsConfig(NamedTuple):
    """How a command-backend agent (or panel member) is confined (agents.sandbox)."""

    sandbox: str = "bwrap"  # bwrap | none (boundaries are then advisory)
    readable: tuple[str, ...] = ("~/.gitconfig", "~/.config/git")  # extra paths it may read …
    writable: tuple[str, ...] = ()  # … and write (each role's CLI state is its own: StateDir.cli)
    max_artifact_bytes: int = 8 * 1024 * 1024  # the most a run's write_artifact may write
    env: tuple[str, ...] = MODEL_ENV  # the owner's variables an agent gets (beyond PATH, locale…)


RUNS = Section(
    RunsConfig,
    {
        "sandbox": Str(choices=SANDBOXES),
        "readable": Strs(empty=True),
        "writable": Strs(empty=True),
        "max_artifact_bytes": Int(1, 1 << 30),
        "env": EnvNames(),
    },
)


def read_guardrails(file: str, table: object) -> Mapping[str, bool]:
    """``[guardrails]``: rules switched on or off by name (``reviewer_decisions`` is read as
    ``reviewer-decisions``: TOML users reach for underscores; the rule has one name). The names,
    defaults and what each refuses are the rules' own, checked with them (``guardrails.switches``)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where(file, 'guardrails')}: expected a table, got {table!r}")
    out = {}
    for key, value in table.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{where(file, 'guardrails', key)}: expected true or false, got {value!r}")
        out[key.replace("_", "-")] = value
    return MappingProxyType(out)


class PanelMember(NamedTuple):
    name: str
    backend: str = "scripted"
    model: str = ""


class PanelConfig(NamedTuple):
    """A panel of several members; its name is ``{artifact_kind}-{writer|reviewer}-panel``."""

    name: str
    kind: str  # "review" | "writing"
    artifact_kind: str
    members: tuple[PanelMember, ...]
    primary: str | None = None
    consensus: str = "majority"
    deadline: float = 600.0  # seconds a member has to file its assessment (and per discussion turn)
    rounds: int = 1  # discussion rounds after the assessments are unsealed

    def mailbox(self, member: str) -> str:
        return member_mailbox(self.name, member)

    @property
    def mailboxes(self) -> tuple[str, ...]:
        return tuple(self.mailbox(m.name) for m in self.members)


def _members(value: object) -> object:
    expected = "a non-empty list of names or {name, backend, model} tables"
    if not isinstance(value, list) or not value:
        raise BadValueError(expected)
    out: list[PanelMember] = []
    for item in value:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not NAME_RE.match(item["name"]):
            raise BadValueError("names matching [a-z0-9][a-z0-9_-]* or {name, backend, model} tables")
        extra = set(item) - {"name", "backend", "model"}
        if extra:
            raise BadValueError(f"member keys name, backend, model (not {', '.join(sorted(extra))})")
        backend = item.get("backend", "scripted")
        if backend not in BACKENDS or not isinstance(item.get("model", ""), str):
            raise BadValueError(f"a member backend among {', '.join(BACKENDS)} and a string model")
        out.append(PanelMember(item["name"], backend, str(item.get("model", ""))))
    if len({m.name for m in out}) != len(out):
        raise BadValueError("distinct member names")
    return tuple(out)


PANEL = Section(
    PanelConfig,
    {
        "kind": Str(choices=("review", "writing")),
        "members": Custom(_members),
        "primary": Str(NAME_RE),
        "consensus": Str(choices=("unanimous", "majority", "any-reject")),
        "deadline": Num(0.1, 7 * DAY),
        "rounds": Int(0, 10),
        "name": Str(),
        "artifact_kind": Str(),
    },
)


def read_panel(file: str, name: str, table: object) -> PanelConfig:
    section = f"panels.{name}"
    parsed = parse_panel(name)
    if parsed is None:
        raise ConfigError(
            f"{where(file, section)}: expected a panel name like 'spec-reviewer-panel' or 'spec-writer-panel'"
        )
    kind = "review" if parsed.side == "reviewer" else "writing"
    if isinstance(table, dict) and "members" not in table:
        raise ConfigError(
            f"{where(file, section, 'members')}: expected a non-empty list of names or "
            "{name, backend, model} tables, got None"
        )
    panel = read(
        file,
        section,
        table,
        PANEL,
        name=name,
        artifact_kind=parsed.kind,
        **({"kind": kind} if not isinstance(table, dict) or "kind" not in table else {}),
    )
    names = [m.name for m in panel.members]
    if panel.primary is not None and panel.primary not in names:
        raise ConfigError(
            f"{where(file, section, 'primary')}: expected one of the members ({', '.join(names)}), "
            f"got {panel.primary!r}"
        )
    return panel


class AgentdConfig(NamedTuple):
    rescan: float = 30.0  # seconds between safety rescans
    max_concurrent: int = 3
    timeout: float = 1800.0  # per run
    role_timeouts: Mapping[str, float] = EMPTY
    max_attempts: int = 3
    retry_backoff: float = 30.0
    pause_after: int = 3
    thread_cap: int = 40
    repeat_limit: int = 3
    repeat_window: float = 3600.0
    daily_tokens: int = 0  # 0: no budget
    role_budgets: Mapping[str, float] = EMPTY
    grace: float = 30.0
    nice: int = 10  # runs are background work: the daemon and the server keep the CPU first
    settle: float = 0.5  # a burst coalescing into a queued task: start it after this much quiet …
    settle_max: float = 10.0  # … or this long after the task was created, whichever is first
    lock_ttl: float = 600.0
    roles: tuple[str, ...] = ()  # empty: every async role with triggers
    backend: str = ""  # force one backend for every run (demo, tests)
    escalate_to: str = "coordinator"  # who hears of failures, loops and spent budgets …
    escalate_human: str = ""  # … and, when that role itself fails, this human role ("": default_sender)


AGENTD = Section(
    AgentdConfig,
    {
        "rescan": Num(0.01, DAY),
        "max_concurrent": Int(1, 1000),
        "timeout": Num(0.1, 7 * DAY),
        "role_timeouts": NumTable(),
        "max_attempts": Int(1, 1000),
        "retry_backoff": Num(0, DAY),
        "pause_after": Int(1, 1000),
        "thread_cap": Int(1, 1_000_000),
        "repeat_limit": Int(1, 1_000_000),
        "repeat_window": Num(0, 30 * DAY),
        "daily_tokens": Int(0, 10**12),
        "role_budgets": NumTable(),
        "grace": Num(0, DAY),
        "nice": Int(0, 19),
        "settle": Num(0, 3600),
        "settle_max": Num(0, DAY),
        "lock_ttl": Num(1.0, 7 * DAY),
        "roles": Names(empty=True),
        "backend": Str(choices=("", *BACKENDS)),
        "escalate_to": Str(NAME_RE),
        "escalate_human": Str(re.compile(r"^([a-z0-9][a-z0-9_-]{0,62})?$")),
    },
)


class AnthropicConfig(NamedTuple):
    model: str = "claude-sonnet-4-5"
    max_tokens: int = 4096
    max_turns: int = 20
    timeout: float = 120.0
    max_retries: int = 2


class CommandConfig(NamedTuple):
    argv: tuple[str, ...] = ("claude", "-p", "--output-format", "json")  # json: its denials and errors are read
    timeout: float = 1800.0
    model: str = ""
    contain: str = "auto"  # auto | bwrap | cgroup | none (agents.contain)
    resume: tuple[str, ...] = ()  # arguments that resume a session, e.g. ["--resume", "{session}"]


class CliConfig(NamedTuple):
    """``[backends.claude-code]``, ``[backends.codex]``, ``[backends.gemini]``: an agent CLI run
    with its own profile (its arguments, MCP wiring and output are the profile's; these tune it)."""

    program: str = ""  # "": the CLI's own command (claude, codex, gemini) on PATH
    model: str = ""  # "": the CLI's default; a role's or panel member's model wins
    max_turns: int = 0  # 0: the role's max_turns, else 20 (CLIs that take a limit)
    max_budget_usd: float = 0.0  # 0: no limit (claude-code)
    tools: tuple[str, ...] = ()  # the CLI's own tools it may use beside the role's (): the profile's
    args: tuple[str, ...] = ()  # more arguments, appended
    timeout: float = 1800.0
    contain: str = "auto"


CLI_SECTION: Section[NamedTuple] = Section(
    CliConfig,
    {
        "program": Str(),
        "model": Str(),
        "max_turns": Int(0, 1000),
        "max_budget_usd": Num(0, 1_000_000),
        "tools": Strs(empty=True),
        "args": Strs(empty=True),
        "timeout": Num(0.1, 7 * DAY),
        "contain": Str(choices=("auto", "bwrap", "cgroup", "none")),
    },
)


class ScriptedConfig(NamedTuple):
    dir: str = "scripted"
    record_dir: str = ""  # save every prompt here (tests prove what a run saw)
    script: str = ""


class BackendsConfig(NamedTuple):
    anthropic: AnthropicConfig = AnthropicConfig()
    command: CommandConfig = CommandConfig()
    scripted: ScriptedConfig = ScriptedConfig()
    clis: Mapping[str, CliConfig] = MappingProxyType({})  # [backends.NAME] of each agent CLI set (one of CLIS)

    def cli(self, name: str) -> CliConfig:
        """The settings of the agent CLI ``name`` (one of CLIS): its section, else the defaults."""
        return self.clis.get(name, CliConfig())


BACKEND_SECTIONS: dict[str, Section[NamedTuple]] = {
    "anthropic": Section(
        AnthropicConfig,
        {
            "model": Str(),
            "max_tokens": Int(1, 1_000_000),
            "max_turns": Int(1, 1000),
            "timeout": Num(0.1, DAY),
            "max_retries": Int(0, 100),
        },
    ),
    "command": Section(
        CommandConfig,
        {
            "argv": Strs(),
            "timeout": Num(0.1, 7 * DAY),
            "model": Str(),
            "contain": Str(choices=("auto", "bwrap", "cgroup", "none")),
            "resume": Strs(),
        },
    ),
    "scripted": Section(ScriptedConfig, {"dir": Str(), "record_dir": Str(), "script": Str()}),
    **dict.fromkeys(CLIS, CLI_SECTION),
}


class ForwarderConfig(NamedTuple):
    """``[bridges.gmail.agents.todo_forwarder]``."""

    enabled: bool | None = None  # unset: on once ``email`` is set (docs/bridges.md)
    email: str = ""  # missing → the agent says "not configured"
    debug: bool = False
    dry_run: bool = False


class GmailAgents(NamedTuple):
    todo_forwarder: ForwarderConfig = ForwarderConfig()


GMAIL_AGENT_SECTIONS: dict[str, Section[NamedTuple]] = {
    "todo_forwarder": Section(ForwarderConfig, {"enabled": Bool(), "email": Str(), "debug": Bool(), "dry_run": Bool()}),
}


class GmailConfig(NamedTuple):
    imap_host: str
    user: str
    imap_port: int = 993
    imap_tls: bool = True
    password_env: str = ""
    password_file: str = ""
    xoauth2_command: str = ""
    role: str = "user"
    poll_interval: float = 60.0
    idle: bool = True
    archive_folder: str = ""  # unset: the server's special-use \\Archive folder, else "Archive"
    classify: bool = True
    model: str = "claude-haiku-4-5"
    dry_run: bool = False
    outbound: bool = False
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_tls: str = "starttls"  # starttls | ssl | none
    relay_host: str = ""  # where agents send (forwards); default the project's own server
    relay_port: int = 0
    agents: GmailAgents = GmailAgents()


class SlackConfig(NamedTuple):
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = "SLACK_APP_TOKEN"  # Socket Mode's app-level token (xapp-…)
    mode: str = "auto"  # socket | http | auto: Socket Mode when the app token is set, else HTTP
    api_base_url: str = "https://slack.com/api/"
    host: str = "127.0.0.1"
    port: int = 3000
    max_body: int = 1 << 20  # HTTP mode: a larger request gets 413
    request_timeout: float = 10.0  # HTTP mode: a connection idle this long is closed
    max_connections: int = 100  # HTTP mode: connections open at once
    read_timeout: float = 5.0  # HTTP mode: a request must arrive whole (headers and body) within this
    max_per_peer: int = 16  # HTTP mode: connections one peer address may hold at once
    channel: str = ""  # watch only this channel ("#argus-inbox" or an id); empty: every channel
    timeout: float = 0.0  # a task's run, unless its intent has one in timeouts (0: the role's run timeout)
    timeouts: Mapping[str, float] = MappingProxyType({})  # intent → seconds
    bot_user_id: str = ""
    default_role: str = "coordinator"
    roles: Mapping[str, str] = MappingProxyType({})  # intent → role
    artifact: str = "specs/*/slack-inbox.md"
    max_concurrent: int = 3
    backend: str = ""
    model: str = "claude-haiku-4-5-20251001"


class BridgesConfig(NamedTuple):
    gmail: GmailConfig | None = None
    slack: SlackConfig | None = None


def _gmail_agents(file: str) -> Custom:
    def check(value: object) -> object:
        if not isinstance(value, dict):
            raise BadValueError("a table of agent tables ([bridges.gmail.agents.NAME])")
        for name in value:
            if name not in GMAIL_AGENT_SECTIONS:
                raise ConfigError(
                    f"{where(file, f'bridges.gmail.agents.{name}')}: unknown agent"
                    f"{suggest(name, list(GMAIL_AGENT_SECTIONS))}; registry: {', '.join(GMAIL_AGENT_SECTIONS)}"
                )
        agents: dict[str, Any] = {
            n: read(file, f"bridges.gmail.agents.{n}", t, GMAIL_AGENT_SECTIONS[n]) for n, t in value.items()
        }
        return GmailAgents(**agents)

    return Custom(check)


def read_bridges(file: str, table: object) -> BridgesConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where(file, 'bridges')}: expected a table, got {table!r}")
    out: dict[str, object] = {}
    for name, sub in table.items():
        if name == "gmail":
            gmail = Section(
                GmailConfig,
                {
                    "imap_host": Str(re.compile(r"^\S+$")),
                    "user": Str(re.compile(r"^\S+$")),
                    "imap_port": Int(1, 65535),
                    "imap_tls": Bool(),
                    "password_env": Str(),
                    "password_file": Str(),
                    "xoauth2_command": Str(),
                    "role": Str(NAME_RE),
                    "poll_interval": Num(0.1, DAY),
                    "idle": Bool(),
                    "archive_folder": Str(),
                    "classify": Bool(),
                    "model": Str(),
                    "dry_run": Bool(),
                    "outbound": Bool(),
                    "smtp_host": Str(),
                    "smtp_port": Int(1, 65535),
                    "smtp_tls": Str(choices=("starttls", "ssl", "none")),
                    "relay_host": Str(),
                    "relay_port": Int(0, 65535),
                    "agents": _gmail_agents(file),
                },
            )
            if isinstance(sub, dict) and not (sub.get("imap_host") and sub.get("user")):
                raise ConfigError(f"{where(file, 'bridges.gmail')}: needs imap_host and user")
            out["gmail"] = read(file, "bridges.gmail", sub, gmail)
        elif name == "slack":
            slack = Section(
                SlackConfig,
                {
                    "signing_secret_env": Str(),
                    "bot_token_env": Str(),
                    "app_token_env": Str(),
                    "mode": Str(choices=("auto", "socket", "http")),
                    "api_base_url": Str(re.compile(r"^https?://")),
                    "host": Str(),
                    "port": Int(0, 65535),
                    "max_body": Int(1024, 64 << 20),
                    "request_timeout": Num(0.1, 3600),
                    "max_connections": Int(1, 10000),
                    "read_timeout": Num(0.1, 3600),
                    "max_per_peer": Int(1, 10000),
                    "channel": Str(re.compile(r"^(#?[a-z0-9][a-z0-9._-]{0,79}|[CGD][A-Z0-9]{2,})?$")),
                    "timeout": Num(0, DAY),
                    "timeouts": NumTable(),
                    "bot_user_id": Str(),
                    "default_role": Str(NAME_RE),
                    "roles": NameTable(),
                    "artifact": Str(),
                    "max_concurrent": Int(1, 100),
                    "backend": Str(choices=("", *BACKENDS)),
                    "model": Str(),
                },
            )
            out["slack"] = read(file, "bridges.slack", sub, slack)
        else:
            raise ConfigError(
                f"{where(file, f'bridges.{name}')}: unknown bridge{suggest(name, ['gmail', 'slack'])}; "
                "expected gmail or slack"
            )
    return BridgesConfig(**out)  # type: ignore[arg-type]


def read_backends(file: str, table: object) -> BackendsConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where(file, 'backends')}: expected a table, got {table!r}")
    out: dict[str, object] = {}
    for name, sub in table.items():
        section = BACKEND_SECTIONS.get(name)
        if section is None:
            raise ConfigError(
                f"{where(file, f'backends.{name}')}: unknown backend{suggest(name, list(BACKENDS))}; "
                f"expected one of {', '.join(BACKENDS)}"
            )
        out[name] = read(file, f"backends.{name}", sub, section)
    clis = MappingProxyType({name: out.pop(name) for name in CLIS if name in out})
    return BackendsConfig(**out, clis=clis)  # type: ignore[arg-type]
