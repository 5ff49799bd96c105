"""Config: load workflow.toml once at the edge and hand a frozen Config down; no globals.

Precedence for the mail root: ``--mail-root`` > ``WORKFLOW_MAIL_ROOT`` > ``[workflow] mail_root``
> ``~/.maildir/workflow``. Every error names the file, the key and the expected value.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from workflow.core.errors import ConfigError

CONFIG_NAME = "workflow.toml"
DEFAULT_STATES = ("proposed", "todo", "doing", "blocked", "done")
DEFAULT_EVENTS = (
    "review-request",
    "approval",
    "rejection",
    "clarification-request",
    "blocker-report",
    "status-update",
    "question",
    "answer",
)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DOMAIN_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
KNOWN_SECTIONS = ("workflow", "smtp", "panels", "agentd", "backends", "bridges", "guardrails", "artifacts")


class SmtpConfig(NamedTuple):
    host: str = "127.0.0.1"
    port: int = 8025
    timeout: float = 60.0  # client: per connection; server: idle per command, and a whole DATA phase
    max_message_size: int = 10 * 1024 * 1024
    max_connections: int = 64
    auth_users_file: str = ""


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
        return f"{self.name}.{member}"

    @property
    def mailboxes(self) -> tuple[str, ...]:
        return tuple(self.mailbox(m.name) for m in self.members)

    @property
    def internal_address(self) -> str:
        return f"{self.name}-internal"


DEFAULT_TRANSITIONS = (
    "proposed -> todo",
    "todo -> doing",
    "doing -> blocked",
    "blocked -> doing",
    "doing -> done",
    "* -> proposed",
)
TRANSITION_RE = re.compile(r"^\s*(\*|[a-z0-9][a-z0-9_-]*)\s*->\s*([a-z0-9][a-z0-9_-]*)\s*$")

GUARDRAILS = {
    "reviewer_decisions": True,  # approvals/rejections only from reviewers, reviewer panels or humans
    "reply_visible": True,  # In-Reply-To must name a message the sender could see (unknown ids pass)
    "artifacts_exist": False,  # X-Artifacts must match a file in the project (off: mail may precede files)
    "state_matches": True,  # X-Workflow-State must name the folder the artifact is in now
    "sealed_review": True,  # no assessment reaches a panel's internal address while its review is sealed
}


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
    smtp: SmtpConfig = SmtpConfig()
    panels: tuple[PanelConfig, ...] = ()
    guardrails: Mapping[str, bool] = MappingProxyType(GUARDRAILS)
    transitions: frozenset[tuple[str, str]] = frozenset()
    commit_event: str = "status-update"
    commit_notify: tuple[str, ...] = ()  # empty: the roles whose artifact globs match
    lock_ttl: float = 600.0
    raw: Mapping[str, Any] = MappingProxyType({})

    @property
    def index_path(self) -> Path:
        return self.mail_root / ".workflow" / "index.sqlite"

    def panel(self, name: str) -> PanelConfig | None:
        for p in self.panels:
            if p.name == name:
                return p
        return None


def default_mail_root(env: Mapping[str, str]) -> Path:
    if env.get("WORKFLOW_MAIL_ROOT"):
        return Path(env["WORKFLOW_MAIL_ROOT"]).expanduser()
    return Path("~/.maildir/workflow").expanduser()


def find_config(start: Path) -> Path | None:
    """The nearest workflow.toml at or above ``start``."""
    for d in (start, *start.parents):
        candidate = d / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


class _Reader:
    """Typed access to one TOML table, with errors naming file, section and key."""

    def __init__(self, file: str, section: str, table: Mapping[str, Any], known: tuple[str, ...]) -> None:
        self.file, self.section, self.table = file, section, table
        for key in table:
            if key not in known:
                self.fail(key, f"a known key ({', '.join(known)})", table[key], unknown=True)

    def fail(self, key: str, expected: str, got: object, unknown: bool = False) -> None:
        where = f"{self.file}: [{self.section}] {key}"
        if unknown:
            raise ConfigError(f"{where}: unknown key; expected {expected}")
        raise ConfigError(f"{where}: expected {expected}, got {got!r}")

    def get_str(self, key: str, default: str, pattern: re.Pattern[str] | None = None) -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            self.fail(key, "a string" + (f" matching {pattern.pattern}" if pattern else ""), value)
        return str(value)

    def get_int(self, key: str, default: int, lo: int, hi: int) -> int:
        value = self.table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            self.fail(key, f"an integer from {lo} to {hi}", value)
        return int(value)

    def get_float(self, key: str, default: float, lo: float, hi: float) -> float:
        value = self.table.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
            self.fail(key, f"a number from {lo} to {hi}", value)
        return float(value)

    def names(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.table.get(key, list(default))
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and NAME_RE.match(v) for v in value)
            or len(set(value)) != len(value)
        ):
            self.fail(key, "a non-empty list of distinct lower-case names", value)
        return tuple(value)


def _panel(file: str, name: str, table: object) -> PanelConfig:
    section = f"panels.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: [{section}]: expected a table, got {table!r}")
    r = _Reader(file, section, table, ("kind", "members", "primary", "consensus", "deadline", "rounds"))
    m = re.match(r"^([a-z0-9][a-z0-9_-]*?)-(writer|reviewer)-panel$", name)
    if not m:
        raise ConfigError(
            f"{file}: [panels.{name}]: expected a panel name like 'spec-reviewer-panel' or 'spec-writer-panel'"
        )
    kind = r.get_str("kind", "review" if m.group(2) == "reviewer" else "writing")
    if kind not in ("review", "writing"):
        r.fail("kind", "'review' or 'writing'", kind)
    raw_members = table.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        r.fail("members", "a non-empty list of names or {name, backend, model} tables", raw_members)
    members: list[PanelMember] = []
    for item in raw_members or []:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not NAME_RE.match(item["name"]):
            r.fail("members", "names matching [a-z0-9][a-z0-9_-]* or {name, backend, model} tables", item)
            continue
        extra = set(item) - {"name", "backend", "model"}
        if extra:
            r.fail("members", "member keys name, backend, model", sorted(extra))
        members.append(PanelMember(item["name"], str(item.get("backend", "scripted")), str(item.get("model", ""))))
    names = [mm.name for mm in members]
    if len(set(names)) != len(names):
        r.fail("members", "distinct member names", names)
    primary = table.get("primary")
    if primary is not None and primary not in names:
        r.fail("primary", f"one of the members ({', '.join(names)})", primary)
    consensus = r.get_str("consensus", "majority")
    if consensus not in ("unanimous", "majority", "any-reject"):
        r.fail("consensus", "'unanimous', 'majority' or 'any-reject'", consensus)
    deadline = r.get_float("deadline", 600.0, 0.1, 7 * 86400.0)
    rounds = r.get_int("rounds", 1, 0, 10)
    return PanelConfig(name, kind, m.group(1), tuple(members), primary, consensus, deadline, rounds)


def _transitions(r: _Reader, states: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """``["proposed -> todo", "* -> proposed", …]`` as (from, to) pairs over the configured states."""
    value = r.table.get("transitions", list(DEFAULT_TRANSITIONS))
    expected = 'a list of "FROM -> TO" strings over the states (FROM may be *)'
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        r.fail("transitions", expected, value)
    edges: set[tuple[str, str]] = set()
    for item in value:
        m = TRANSITION_RE.match(item)
        if not m:
            r.fail("transitions", expected, item)
            continue
        src, dst = m.groups()
        for name in (src, dst):
            if name != "*" and name not in states:
                r.fail("transitions", f"states from [workflow] states ({', '.join(states)})", item)
        for s in states if src == "*" else (src,):
            if s != dst:
                edges.add((s, dst))
    return frozenset(edges)


def load_config(
    path: Path | None = None,
    *,
    cwd: Path | None = None,
    mail_root: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Load ``path`` (or the nearest workflow.toml above ``cwd``; defaults when there is none)."""
    env = os.environ if env is None else env
    cwd = (cwd or Path.cwd()).resolve()
    if path is None and env.get("WORKFLOW_CONFIG"):
        path = Path(env["WORKFLOW_CONFIG"])
    if path is not None:
        path = path.expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (expected a workflow.toml)")
    else:
        path = find_config(cwd)
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read: {e}") from None
    file = str(path) if path else "(defaults)"
    for section in data:
        if section not in KNOWN_SECTIONS:
            raise ConfigError(f"{file}: [{section}]: unknown section; expected one of {', '.join(KNOWN_SECTIONS)}")
        if not isinstance(data[section], dict):
            raise ConfigError(f"{file}: {section}: expected a table, got {data[section]!r}")
    project_dir = path.parent if path else cwd
    wf = _Reader(
        file,
        "workflow",
        data.get("workflow", {}),
        ("domain", "mail_root", "roles_dir", "templates_dir", "states", "event_types", "artifact_roots", "default_sender"),
    )
    smtp = _Reader(
        file, "smtp", data.get("smtp", {}),
        ("host", "port", "timeout", "max_message_size", "max_connections", "auth_users_file"),
    )
    if mail_root is not None:
        root = mail_root.expanduser()
    elif env.get("WORKFLOW_MAIL_ROOT"):
        root = Path(env["WORKFLOW_MAIL_ROOT"]).expanduser()
    elif "mail_root" in wf.table:
        root = Path(wf.get_str("mail_root", "")).expanduser()
        if not root.is_absolute():
            root = project_dir / root
    else:
        root = default_mail_root(env)
    gr_table = data.get("guardrails", {})
    _Reader(file, "guardrails", gr_table, tuple(GUARDRAILS))
    guardrails = dict(GUARDRAILS)
    for key, value in gr_table.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{file}: [guardrails] {key}: expected true or false, got {value!r}")
        guardrails[key] = value
    art = _Reader(file, "artifacts", data.get("artifacts", {}), ("transitions", "commit_event", "commit_notify"))
    states = wf.names("states", DEFAULT_STATES)
    event_types = wf.names("event_types", DEFAULT_EVENTS)
    transitions = _transitions(art, states)
    commit_event = art.get_str("commit_event", "status-update")
    if commit_event not in event_types:
        art.fail("commit_event", f"one of the event types ({', '.join(event_types)})", commit_event)
    commit_notify = art.names("commit_notify", ("-",)) if "commit_notify" in art.table else ()
    agentd = data.get("agentd", {})
    lock_ttl = _Reader(file, "agentd", {"lock_ttl": agentd["lock_ttl"]} if "lock_ttl" in agentd else {}, ("lock_ttl",))
    panels_table = data.get("panels", {})
    panels = tuple(_panel(file, name, t) for name, t in panels_table.items())
    return Config(
        path=path,
        project_dir=project_dir,
        mail_root=root.resolve() if root.is_absolute() else (cwd / root).resolve(),
        domain=wf.get_str("domain", "workflow.local", DOMAIN_RE),
        roles_dir=project_dir / wf.get_str("roles_dir", "roles"),
        templates_dir=project_dir / wf.get_str("templates_dir", "email-templates"),
        states=states,
        event_types=event_types,
        artifact_roots=wf.names("artifact_roots", ("specs",)),
        default_sender=wf.get_str("default_sender", "user", NAME_RE),
        smtp=SmtpConfig(
            host=smtp.get_str("host", "127.0.0.1"),
            port=smtp.get_int("port", 8025, 0, 65535),
            timeout=smtp.get_float("timeout", 60.0, 0.1, 3600.0),
            max_message_size=smtp.get_int("max_message_size", 10 * 1024 * 1024, 1024, 1 << 30),
            max_connections=smtp.get_int("max_connections", 64, 1, 100_000),
            auth_users_file=smtp.get_str("auth_users_file", ""),
        ),
        panels=panels,
        guardrails=MappingProxyType(guardrails),
        transitions=transitions,
        commit_event=commit_event,
        commit_notify=commit_notify,
        lock_ttl=lock_ttl.get_float("lock_ttl", 600.0, 1.0, 7 * 86400.0),
        raw=data,
    )
