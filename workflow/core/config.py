"""Config: load workflow.toml once at the edge and hand a frozen, typed Config down; no globals.

Every section is read here, through its declared shape (``sections``, ``backendconfig``, and the
plugin sections the entry point registers: ``[bridges.NAME]``), so a typo anywhere fails at load
naming the file, the key and what was expected; nothing later validates config again.

Precedence for the mail root: ``--mail-root`` > ``WORKFLOW_MAIL_ROOT`` > ``[workflow] mail_root``
> ``~/.maildir/workflow``. Every error names the file, the key and the expected value.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from workflow.core import configfile
from workflow.core.backendconfig import (
    BACKENDS_TABLE,
    AnthropicConfig,
    BackendsConfig,
    CliConfig,
    CommandConfig,
    ScriptedConfig,
)
from workflow.core.backendkinds import BACKENDS, CLIS
from workflow.core.errors import ConfigError
from workflow.core.hosts import HostConfig, identity, read_hosts
from workflow.core.schema import NAME_RE, Plugin, Tables, absolute, read, suggest, where
from workflow.core.sections import (
    AGENTD,
    ARTIFACTS,
    DEFAULT_EVENTS,
    DEFAULT_STATES,
    DEFAULT_TRANSITIONS,
    DOMAIN_RE,
    RUNS,
    SMTP,
    TRANSITION_RE,
    WEB,
    WORKFLOW,
    AgentdConfig,
    PanelConfig,
    PanelMember,
    RunsConfig,
    SmtpConfig,
    WebConfig,
    read_guardrails,
    read_panel,
)
from workflow.core.statedir import StateDir

R = TypeVar("R", bound=NamedTuple)
CONFIG_NAME = "workflow.toml"
KNOWN_SECTIONS = (
    "workflow",
    "smtp",
    "web",
    "runs",
    "panels",
    "agentd",
    "backends",
    "bridges",
    "guardrails",
    "artifacts",
    "hosts",
)
__all__ = [
    "BACKENDS",
    "CLIS",
    "CONFIG_NAME",
    "DEFAULT_EVENTS",
    "DEFAULT_STATES",
    "DEFAULT_TRANSITIONS",
    "DOMAIN_RE",
    "NAME_RE",
    "Plugin",
    "TRANSITION_RE",
    "AgentdConfig",
    "AnthropicConfig",
    "BackendsConfig",
    "CliConfig",
    "CommandConfig",
    "Config",
    "PanelConfig",
    "PanelMember",
    "RunsConfig",
    "ScriptedConfig",
    "SmtpConfig",
    "load_config",
]


DEFAULT_GUARDRAILS: Mapping[str, bool] = MappingProxyType({})  # each rule's own default


class Config(NamedTuple):
    project_dir: Path
    mail_root: Path
    path: Path | None = None
    domain: str = "workflow.local"
    roles_dir: Path = Path("roles")
    templates_dir: Path = Path("email-templates")
    states: tuple[str, ...] = DEFAULT_STATES
    event_types: tuple[str, ...] = DEFAULT_EVENTS
    artifact_roots: tuple[str, ...] = ("specs",)
    default_sender: str = "user"
    backend: str = ""  # [workflow] backend: every role's unless its file names one
    smtp: SmtpConfig = SmtpConfig()
    web: WebConfig = WebConfig()
    runs: RunsConfig = RunsConfig()
    panels: tuple[PanelConfig, ...] = ()
    guardrails: Mapping[str, bool] = DEFAULT_GUARDRAILS
    transitions: frozenset[tuple[str, str]] = frozenset()
    commit_event: str = "status-update"
    commit_notify: tuple[str, ...] = ()  # empty: the roles whose artifact globs match
    agentd: AgentdConfig = AgentdConfig()
    backends: BackendsConfig = BackendsConfig()
    bridges: Mapping[str, NamedTuple] = MappingProxyType({})  # [bridges.NAME] as its plugin's record
    plugins: tuple[Plugin, ...] = ()  # the plugin sections this was read with (a reload reads with them too)
    hosts: tuple[HostConfig, ...] = ()  # [hosts.NAME], in the file's order (core.hosts)
    this_host: str = ""  # which of them this machine is (its state directory says; "" for none)

    @property
    def state(self) -> StateDir:
        """``<mail root>/.workflow``: the index, queues, locks, outbox… (never mail)."""
        return StateDir.of(self.mail_root)

    @property
    def any_artifact(self) -> str:
        """The glob that names every artifact: what mail about no artifact in particular names
        (a bridge's question, an answer to it, a report about a thread)."""
        return f"{self.artifact_roots[0]}/*/*"

    @property
    def index_path(self) -> Path:
        return self.state.index

    @property
    def file(self) -> str:
        """How errors name this config: its path, or "(defaults)"."""
        return str(self.path) if self.path else "(defaults)"

    def section(self, record: type[R]) -> R | None:
        """The plugin section read as ``record`` (``config.section(SlackConfig)``), or None when
        the file has none."""
        for value in self.bridges.values():
            if type(value) is record:
                return value
        return None

    def host(self, name: str) -> HostConfig | None:
        return next((h for h in self.hosts if h.name == name), None)

    def panel(self, name: str) -> PanelConfig | None:
        for p in self.panels:
            if p.name == name:
                return p
        return None


def default_mail_root(env: Mapping[str, str]) -> Path:
    if env.get("WORKFLOW_MAIL_ROOT"):
        return Path(env["WORKFLOW_MAIL_ROOT"]).expanduser()
    return Path("~/.maildir/workflow").expanduser()


def _transitions(file: str, items: tuple[str, ...], states: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """``["proposed -> todo", "* -> proposed", …]`` as (from, to) pairs over the configured states."""
    edges: set[tuple[str, str]] = set()
    for item in items:
        m = TRANSITION_RE.match(item)
        assert m is not None  # checked by the section's spec
        src, dst = m.groups()
        for name in (src, dst):
            if name != "*" and name not in states:
                raise ConfigError(
                    f"{where(file, 'artifacts', 'transitions')}: expected states from [workflow] states "
                    f"({', '.join(states)}), got {item!r}"
                )
        for s in states if src == "*" else (src,):
            if s != dst:
                edges.add((s, dst))
    return frozenset(edges)


def _plugins(plugins: tuple[Plugin, ...], kind: str, what: str) -> Tables[Mapping[str, NamedTuple]]:
    """``[KIND]``: each ``[KIND.NAME]`` against the section its plugin registered."""
    sections = {p.name: p.section for p in plugins if p.kind == kind}
    return Tables(what, sections, lambda records: MappingProxyType(records))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None


def _absolute(config: Config) -> Config:
    """Every file and folder a section names (``schema.Owned``) as ``mail_root`` is read: ``~``
    expanded, relative to the project — the users file, TLS certificates and keys, a bridge's
    password file, the scripted backend's scripts."""
    base = config.project_dir
    b = config.backends
    return config._replace(
        smtp=absolute(config.smtp, base),
        web=absolute(config.web, base),
        backends=b._replace(
            anthropic=absolute(b.anthropic, base),
            command=absolute(b.command, base),
            scripted=absolute(b.scripted, base),
            clis=MappingProxyType({k: absolute(v, base) for k, v in b.clis.items()}),
        ),
        bridges=MappingProxyType({k: absolute(v, base) for k, v in config.bridges.items()}),
    )


def load_config(
    path: Path | None = None,
    *,
    cwd: Path | None = None,
    mail_root: Path | None = None,
    env: Mapping[str, str] | None = None,
    plugins: tuple[Plugin, ...] = (),
    host: str | None = None,
) -> Config:
    """Load ``path`` (or the nearest workflow.toml above ``cwd``; defaults when there is none);
    ``plugins`` are the sections the composition root registers (``bridges.sections.SECTIONS``);
    ``host``: which of ``[hosts]`` this machine is, instead of what its state directory says."""
    env = os.environ if env is None else env
    cwd = (cwd or Path.cwd()).resolve()
    found = configfile.lookup(str(path) if path is not None else None, env, str(cwd))  # as the fast path does
    path = Path(found) if found is not None else None
    data = _read_toml(path) if path is not None else {}
    file = str(path) if path else "(defaults)"
    for section in data:
        if section not in KNOWN_SECTIONS:
            raise ConfigError(
                f"{file}: [{section}]: unknown section{suggest(section, list(KNOWN_SECTIONS))}; "
                f"expected one of {', '.join(KNOWN_SECTIONS)}"
            )
        if not isinstance(data[section], dict):
            raise ConfigError(f"{file}: {section}: expected a table, got {data[section]!r}")
    project_dir = path.parent if path else cwd
    wf = read(file, "workflow", data.get("workflow", {}), WORKFLOW)
    if mail_root is not None:
        root = mail_root.expanduser()
    elif env.get("WORKFLOW_MAIL_ROOT"):
        root = Path(env["WORKFLOW_MAIL_ROOT"]).expanduser()
    elif "mail_root" in data.get("workflow", {}):
        root = Path(wf.mail_root).expanduser()
        if not root.is_absolute():
            root = project_dir / root
    else:
        root = default_mail_root(env)
    art = read(file, "artifacts", data.get("artifacts", {}), ARTIFACTS)
    if art.commit_event not in wf.event_types:
        raise ConfigError(
            f"{where(file, 'artifacts', 'commit_event')}: expected one of the event types "
            f"({', '.join(wf.event_types)}), got {art.commit_event!r}"
        )
    mail_root_path = root.resolve() if root.is_absolute() else (cwd / root).resolve()
    hosts = read_hosts(file, data.get("hosts", {}))
    this = identity(file, hosts, StateDir.of(mail_root_path).host, host)
    smtp = read(file, "smtp", data.get("smtp", {}), SMTP)
    web = read(file, "web", data.get("web", {}), WEB)
    names = [h.name for h in hosts]
    panels = tuple(read_panel(file, name, t) for name, t in data.get("panels", {}).items())
    for panel in panels:
        for m in panel.members:
            if m.host and m.host not in names:
                raise ConfigError(
                    f"{where(file, f'panels.{panel.name}', 'members')}: member {m.name}'s host {m.host!r} names no "
                    f"host; expected one of [hosts] ({', '.join(names) or 'none is listed'}){suggest(m.host, names)}"
                )
    here = next((h for h in hosts if h.name == this), None)
    if here is not None:  # one file for every host: each host's listeners bind its own address
        smtp, web = smtp._replace(host=here.address), web._replace(host=here.address)
    config = Config(
        path=path,
        project_dir=project_dir,
        mail_root=mail_root_path,
        domain=wf.domain,
        roles_dir=project_dir / wf.roles_dir,
        templates_dir=project_dir / wf.templates_dir,
        states=wf.states,
        event_types=wf.event_types,
        artifact_roots=wf.artifact_roots,
        default_sender=wf.default_sender,
        backend=wf.backend,
        smtp=smtp,
        web=web,
        runs=read(file, "runs", data.get("runs", {}), RUNS),
        panels=panels,
        guardrails=read_guardrails(file, data.get("guardrails", {})),
        transitions=_transitions(file, art.transitions, wf.states),
        commit_event=art.commit_event,
        commit_notify=art.commit_notify,
        agentd=read(file, "agentd", data.get("agentd", {}), AGENTD),
        backends=BACKENDS_TABLE.read_in(file, "backends", data.get("backends", {})),
        bridges=_plugins(plugins, "bridges", "bridge").read_in(file, "bridges", data.get("bridges", {})),
        plugins=plugins,
        hosts=hosts,
        this_host=this,
    )
    return _absolute(config)
