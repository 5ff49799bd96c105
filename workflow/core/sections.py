"""Sections: the typed shape of core's workflow.toml sections — keys, types, defaults and limits.

Declared once, read once: each section is a NamedTuple whose every field is ``Annotated[type,
Spec] = default`` (``core.schema``), so a key cannot be accepted without being a field;
``config.load_config`` reads each table through ``schema.read``, so a typo anywhere (``[agentd]
max_concurent``) fails at load naming the file, the key and what was expected. Backends' sections
are in ``backendconfig``; bridges declare theirs and the composition root registers them.
"""

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, NamedTuple

from workflow.core import events
from workflow.core.addresses import member_mailbox, parse_panel
from workflow.core.backendkinds import BACKENDS, CLI_KINDS
from workflow.core.errors import ConfigError
from workflow.core.schema import (
    NAME_RE,
    BadValueError,
    Custom,
    EnvNames,
    Fixed,
    Int,
    Names,
    Num,
    NumTable,
    Owned,
    Section,
    Str,
    Strs,
    read,
    where,
)

DAY = 86400.0
EMPTY: Mapping[str, float] = MappingProxyType({})
DEFAULT_STATES = ("proposed", "todo", "doing", "blocked", "done")
DEFAULT_EVENTS = events.NAMES
DOMAIN_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


AUTH_MODES = ("required", "off")
DEFAULT_TRANSITIONS = (
    "proposed -> todo",
    "todo -> doing",
    "doing -> blocked",
    "blocked -> doing",
    "doing -> done",
    "* -> proposed",
)
TRANSITION_RE = re.compile(r"^\s*(\*|[a-z0-9][a-z0-9_-]*)\s*->\s*([a-z0-9][a-z0-9_-]*)\s*$")


class WorkflowSection(NamedTuple):
    domain: Annotated[str, Str(DOMAIN_RE)] = "workflow.local"
    mail_root: Annotated[str, Str()] = ""
    roles_dir: Annotated[str, Str()] = "roles"
    templates_dir: Annotated[str, Str()] = "email-templates"
    states: Annotated[tuple[str, ...], Names()] = DEFAULT_STATES
    event_types: Annotated[tuple[str, ...], Names()] = DEFAULT_EVENTS
    artifact_roots: Annotated[tuple[str, ...], Names()] = ("specs",)
    default_sender: Annotated[str, Str(NAME_RE)] = "user"
    # every role's backend unless its file names one; "" = none chosen yet
    backend: Annotated[str, Str(choices=("", *BACKENDS))] = ""


WORKFLOW = Section(WorkflowSection)


def _transition_list(value: object) -> object:
    expected = 'a list of "FROM -> TO" strings over the states (FROM may be *)'
    if not isinstance(value, list) or not all(isinstance(v, str) and TRANSITION_RE.match(v) for v in value):
        raise BadValueError(expected)
    return tuple(value)


class ArtifactsSection(NamedTuple):
    transitions: Annotated[tuple[str, ...], Custom(_transition_list)] = DEFAULT_TRANSITIONS
    commit_event: Annotated[str, Str()] = "status-update"
    commit_notify: Annotated[tuple[str, ...], Names(empty=True)] = ()  # empty: the roles whose artifact globs match


ARTIFACTS = Section(ArtifactsSection)


class SmtpConfig(NamedTuple):
    host: Annotated[str, Str()] = "127.0.0.1"
    port: Annotated[int, Int(0, 65535)] = 8025
    # client: per connection; server: idle per command, and a whole DATA phase
    timeout: Annotated[float, Num(0.1, 3600.0)] = 60.0
    max_message_size: Annotated[int, Int(1024, 1 << 30)] = 10 * 1024 * 1024
    max_connections: Annotated[int, Int(1, 100_000)] = 64
    # required | off (trust-the-host: any local process may send as any role)
    auth: Annotated[str, Str(choices=AUTH_MODES)] = "required"
    # SMTP AUTH logins and the roles each may send as (delivery.credentials)
    auth_users_file: Annotated[str, Owned("file")] = ""
    login_timeout: Annotated[float, Num(0.1, 3600.0)] = 10.0  # server: seconds a connection has to log in
    # server: seconds a notification's template may take to render (XNOTIFY)
    render_timeout: Annotated[float, Num(0.1, 600.0)] = 10.0
    tls_cert: Annotated[str, Owned("file")] = ""  # STARTTLS for a non-loopback listener: PEM certificate chain …
    tls_key: Annotated[str, Owned("file", secret=True)] = ""  # … and its key


SMTP = Section(SmtpConfig)


class WebConfig(NamedTuple):
    """``workflow web``: the browser cockpit (``workflow.web``) — loopback unless TLS is set up."""

    host: Annotated[str, Str()] = "127.0.0.1"
    port: Annotated[int, Int(0, 65535)] = 8026
    tls_cert: Annotated[str, Owned("file")] = ""  # HTTPS, required off loopback: PEM certificate chain …
    tls_key: Annotated[str, Owned("file", secret=True)] = ""  # … and its key
    session_hours: Annotated[float, Num(0.05, 24 * 30)] = 12.0  # a login lasts this long
    metrics_token: Annotated[str, Str()] = ""  # a scraper of /metrics may send it as a Bearer token


WEB = Section(WebConfig)

SANDBOXES = ("bwrap", "none")


MODEL_ENV = tuple(  # what the agent CLIs need to reach their models (each CLI's ``Cli``): never a bridge's secret
    dict.fromkeys(name for k in CLI_KINDS if k.cli is not None for name in (*k.cli.credentials, *k.cli.env))
)


GIT_FILES = ("~/.gitconfig", "~/.config/git/config", "~/.config/git/ignore", "~/.config/git/attributes")


class RunsConfig(NamedTuple):
    """How a command-backend agent (or panel member) is confined (agents.sandbox)."""

    sandbox: Annotated[str, Str(choices=SANDBOXES)] = "bwrap"  # bwrap | none (boundaries are then advisory)
    # extra paths it may read (git's config, never its credential store: agents.sandbox hides any) …
    readable: Annotated[tuple[str, ...], Strs(empty=True)] = GIT_FILES
    writable: Annotated[tuple[str, ...], Strs(empty=True)] = ()  # … and write (each role's CLI state: StateDir.cli)
    # the most a run's write_artifact may write
    max_artifact_bytes: Annotated[int, Int(1, 1 << 30)] = 8 * 1024 * 1024
    # the owner's variables an agent gets (beyond PATH, locale…)
    env: Annotated[tuple[str, ...], EnvNames()] = MODEL_ENV


RUNS = Section(RunsConfig)


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
    host: str = ""  # the [hosts.NAME] its runs happen on; "": its panel's (the first host)


def _members(value: object) -> object:
    expected = "a non-empty list of names or {name, backend, model, host} tables"
    if not isinstance(value, list) or not value:
        raise BadValueError(expected)
    out: list[PanelMember] = []
    for item in value:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not NAME_RE.match(item["name"]):
            raise BadValueError("names matching [a-z0-9][a-z0-9_-]* or {name, backend, model, host} tables")
        extra = set(item) - {"name", "backend", "model", "host"}
        if extra:
            raise BadValueError(f"member keys name, backend, model, host (not {', '.join(sorted(extra))})")
        if not isinstance(item.get("host", ""), str) or not (NAME_RE.match(item["host"]) if item.get("host") else True):
            raise BadValueError("a member host naming a [hosts.NAME] table")
        backend = item.get("backend", "scripted")
        if backend not in BACKENDS or not isinstance(item.get("model", ""), str):
            raise BadValueError(f"a member backend among {', '.join(BACKENDS)} and a string model")
        out.append(PanelMember(item["name"], backend, str(item.get("model", "")), str(item.get("host", ""))))
    if len({m.name for m in out}) != len(out):
        raise BadValueError("distinct member names")
    return tuple(out)


class PanelConfig(NamedTuple):
    """A panel of several members; its name is ``{artifact_kind}-{writer|reviewer}-panel``."""

    name: Annotated[str, Fixed()]  # the table's name …
    kind: Annotated[str, Str(choices=("review", "writing"))]  # … sets these unless kind is given
    artifact_kind: Annotated[str, Fixed()]
    members: Annotated[tuple[PanelMember, ...], Custom(_members)]
    primary: Annotated[str | None, Str(NAME_RE)] = None
    consensus: Annotated[str, Str(choices=("unanimous", "majority", "any-reject"))] = "majority"
    # seconds a member has to file its assessment (and per discussion turn)
    deadline: Annotated[float, Num(0.1, 7 * DAY)] = 600.0
    rounds: Annotated[int, Int(0, 10)] = 1  # discussion rounds after the assessments are unsealed

    def mailbox(self, member: str) -> str:
        return member_mailbox(self.name, member)

    @property
    def mailboxes(self) -> tuple[str, ...]:
        return tuple(self.mailbox(m.name) for m in self.members)


PANEL = Section(PanelConfig)


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
    rescan: Annotated[float, Num(0.01, DAY)] = 30.0  # seconds between safety rescans
    max_concurrent: Annotated[int, Int(1, 1000)] = 3
    timeout: Annotated[float, Num(0.1, 7 * DAY)] = 1800.0  # per run
    role_timeouts: Annotated[Mapping[str, float], NumTable()] = EMPTY
    max_attempts: Annotated[int, Int(1, 1000)] = 3
    retry_backoff: Annotated[float, Num(0, DAY)] = 30.0
    pause_after: Annotated[int, Int(1, 1000)] = 3
    thread_cap: Annotated[int, Int(1, 1_000_000)] = 40
    repeat_limit: Annotated[int, Int(1, 1_000_000)] = 3
    repeat_window: Annotated[float, Num(0, 30 * DAY)] = 3600.0
    daily_tokens: Annotated[int, Int(0, 10**12)] = 0  # 0: no budget
    role_budgets: Annotated[Mapping[str, float], NumTable()] = EMPTY
    grace: Annotated[float, Num(0, DAY)] = 30.0
    # a model API that takes the connection and says nothing: progress every model_progress s, the
    # roles using it paused after model_wait s (agents.modelapi; 0: not asked)
    model_wait: Annotated[float, Num(0, DAY)] = 120.0
    model_progress: Annotated[float, Num(0.1, DAY)] = 30.0
    nice: Annotated[int, Int(0, 19)] = 10  # runs are background work: the daemon and the server keep the CPU first
    settle: Annotated[float, Num(0, 3600)] = 0.5  # a burst coalescing into a queued task: start after this quiet …
    settle_max: Annotated[float, Num(0, DAY)] = 10.0  # … or this long after the task was created, whichever first
    lock_ttl: Annotated[float, Num(1.0, 7 * DAY)] = 600.0
    roles: Annotated[tuple[str, ...], Names(empty=True)] = ()  # empty: every async role with triggers
    backend: Annotated[str, Str(choices=("", *BACKENDS))] = ""  # force one backend for every run (demo, tests)
    # who hears of failures, loops and spent budgets (a bridge's question's run too) …
    escalate_to: Annotated[str, Str(NAME_RE)] = "coordinator"
    # … and, when that role itself fails, this human role ("": default_sender)
    escalate_human: Annotated[str, Str(re.compile(r"^([a-z0-9][a-z0-9_-]{0,62})?$"))] = ""


AGENTD = Section(AgentdConfig)


# core's own tables, by the name they have in workflow.toml ([panels.NAME] each against PANEL)
CORE_SECTIONS: Mapping[str, Section[Any]] = MappingProxyType(
    {
        "workflow": WORKFLOW,
        "smtp": SMTP,
        "web": WEB,
        "runs": RUNS,
        "panels.NAME": PANEL,
        "agentd": AGENTD,
        "artifacts": ARTIFACTS,
    }
)
