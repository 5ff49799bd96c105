"""Roles: load ``roles/<name>.md`` (TOML front matter between +++ lines, prompt as the body).

Built-in roles ship with the package; a project's own ``roles/`` overrides them file by file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from workflow.core.config import BACKENDS, NAME_RE, TRANSITION_RE, Config
from workflow.core.errors import RosterError
from workflow.core.resources import builtin_dir

MODES = ("async", "sync", "human")
KEYS = (
    "mode",
    "triggers",
    "artifacts",
    "backend",
    "model",
    "panel",
    "description",
    "max_turns",
    "moves",
    "hands_off",
    "host",
)


class Role(NamedTuple):
    name: str
    mode: str
    description: str
    prompt: str
    path: Path
    triggers: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    backend: str = ""  # "": the project's [workflow] backend
    model: str = ""
    panel: str | None = None
    moves: tuple[tuple[str, str], ...] = ()  # ("proposed", "todo"); "*" as source means any state
    max_turns: int = 0  # 0: the backend's default
    hands_off: tuple[str, ...] = ()  # the roles its approval goes on to when it names no NEXT_ROLES
    keys: frozenset[str] = frozenset()  # the front matter keys its file sets
    host: str = ""  # the [hosts.NAME] it lives on; "": the first host (Roster.host_of)

    @property
    def takes_mail(self) -> bool:
        return self.mode != "sync"

    def may_move(self, src: str, dst: str) -> bool:
        return (src, dst) in self.moves or ("*", dst) in self.moves

    def describe_moves(self) -> str:
        return ", ".join(f"{a} → {b}" for a, b in self.moves) or "none"


STATED_TRIGGERS = re.compile(r"^\s*[-*]?\s*Mail that wakes you:\s*(.*?)\.?\s*$", re.M)
STATED_MOVES = re.compile(r"^\s*[-*]?\s*Moves you own:\s*(.*?)(?:\.\s|\.$|$)", re.M)


def _stated(text: str) -> list[str]:
    items = [i.strip().strip("`") for i in re.split(r",|\band\b", text)]
    return [i for i in items if i and i.lower() not in ("none", "nothing")]


def disagreements(role: Role) -> list[str]:
    """Where a role's prompt states triggers or moves (``Mail that wakes you: …``, ``Moves you own:
    …``) that its front matter does not give it, or leaves out ones it does: the model would act
    on the text, the server and ``move`` on the front matter. One line per disagreement."""
    out: list[str] = []
    if role.mode == "human":  # a person is never woken, and may make any legal move
        return out
    for m in STATED_TRIGGERS.finditer(role.prompt):
        said = set(_stated(m.group(1)))
        if said != set(role.triggers):
            out.append(
                f"{role.path}: its text says the mail that wakes it is {', '.join(sorted(said)) or 'none'}; "
                f"its front matter triggers are {', '.join(role.triggers) or 'none'}"
            )
    for m in STATED_MOVES.finditer(role.prompt):
        said_moves: set[tuple[str, str]] = set()
        for item in _stated(m.group(1)):
            parts = [x.strip() for x in re.split(r"→|->", item)]
            if len(parts) == 2 and all(parts):
                said_moves.add((parts[0], parts[1]))
        if said_moves != set(role.moves):
            out.append(
                f"{role.path}: its text says its moves are "
                f"{', '.join(f'{a} → {b}' for a, b in sorted(said_moves)) or 'none'}; "
                f"its front matter moves are {role.describe_moves()}"
            )
    return out


def _list(path: Path, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RosterError(f"{path}: front matter key {key}: expected a list of strings, got {value!r}")
    return tuple(value)


def parse_role(path: Path, text: str, event_types: Iterable[str], hosts: tuple[str, ...] = ()) -> Role:
    """Parse one role file; every error names the file and the key."""
    name = path.stem
    if not NAME_RE.match(name):
        raise RosterError(f"{path}: role name {name!r} must match {NAME_RE.pattern}")
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "+++":
        raise RosterError(f"{path}: expected TOML front matter starting with a '+++' line")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "+++")
    except StopIteration:
        raise RosterError(f"{path}: front matter has no closing '+++' line") from None
    try:
        meta = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as e:
        raise RosterError(f"{path}: invalid TOML front matter: {e}") from None
    for key in meta:
        if key not in KEYS:
            raise RosterError(f"{path}: unknown front matter key {key!r}; expected one of {', '.join(KEYS)}")
    mode = meta.get("mode", "async")
    if mode not in MODES:
        raise RosterError(f"{path}: front matter key mode: expected one of {', '.join(MODES)}, got {mode!r}")
    triggers = _list(path, "triggers", meta.get("triggers", []))
    known = tuple(event_types)
    for t in triggers:
        if t not in known:
            raise RosterError(
                f"{path}: front matter key triggers: unknown event type {t!r}; expected one of {', '.join(known)}"
            )
    for key in ("backend", "model", "panel", "description", "host"):
        if key in meta and not isinstance(meta[key], str):
            raise RosterError(f"{path}: front matter key {key}: expected a string, got {meta[key]!r}")
    if meta.get("backend", "") not in ("", *BACKENDS):
        raise RosterError(
            f"{path}: front matter key backend: expected one of {', '.join(BACKENDS)}, got {meta['backend']!r}"
        )
    host = str(meta.get("host", ""))
    if host and host not in hosts:
        expected = f"one of [hosts] ({', '.join(hosts)})" if hosts else "a [hosts.NAME] table, and there is none"
        raise RosterError(f"{path}: front matter key host: {host!r} names no host; expected {expected}")
    moves: list[tuple[str, str]] = []
    for item in _list(path, "moves", meta.get("moves", [])):
        m = TRANSITION_RE.match(item)
        if not m:
            raise RosterError(f'{path}: front matter key moves: expected "FROM -> TO" (FROM may be *), got {item!r}')
        moves.append((m.group(1), m.group(2)))
    hands_off = _list(path, "hands_off", meta.get("hands_off", []))
    for h in hands_off:
        if not NAME_RE.match(h):
            raise RosterError(f"{path}: front matter key hands_off: {h!r} is not a role name ({NAME_RE.pattern})")
    max_turns = meta.get("max_turns", 0)
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or not 0 <= max_turns <= 1000:
        raise RosterError(f"{path}: front matter key max_turns: expected an integer from 0 to 1000, got {max_turns!r}")
    return Role(
        name=name,
        mode=mode,
        description=str(meta.get("description", "")),
        prompt="\n".join(lines[end + 1 :]).strip() + "\n",
        path=path,
        triggers=triggers,
        artifacts=_list(path, "artifacts", meta.get("artifacts", [])),
        backend=str(meta.get("backend", "")),
        model=str(meta.get("model", "")),
        panel=meta.get("panel"),
        moves=tuple(moves),
        max_turns=max_turns,
        hands_off=hands_off,
        keys=frozenset(meta),
        host=host,
    )


class Roles(Mapping[str, Role]):
    """Every role by name; a role file is read and parsed only when that role is asked for.

    Which roles exist is known from the file names alone, so looking up one role (as
    ``workflow inbox ROLE`` does) parses one file, not all of them; iterating parses them all.
    """

    def __init__(self, files: dict[str, Path], event_types: tuple[str, ...], hosts: tuple[str, ...] = ()) -> None:
        self._files = files
        self._events = event_types
        self._hosts = hosts
        self._parsed: dict[str, Role] = {}

    def __getitem__(self, name: str) -> Role:
        role = self._parsed.get(name)
        if role is None:
            path = self._files[name]
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise RosterError(f"{path}: cannot read role file: {e}") from None
            role = parse_role(path, text, self._events, self._hosts)
            builtin = builtin_dir("roles") / path.name
            if "hands_off" not in role.keys and path != builtin and builtin.is_file():
                # a project's copy of a built-in role (made human, say) that says nothing of its
                # hand-off keeps the built-in's: the pipeline goes on whoever takes the role
                role = role._replace(hands_off=parse_role(builtin, builtin.read_text("utf-8"), self._events).hands_off)
            self._parsed[name] = role
        return role

    def __contains__(self, name: object) -> bool:
        return name in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._files))

    def __len__(self) -> int:
        return len(self._files)


def role_files(config: Config) -> dict[str, Path]:
    """Each role's file: the built-in roles overlaid by the project's roles dir, by file name."""
    files: dict[str, Path] = {}
    for d in (builtin_dir("roles"), config.roles_dir):
        if d.is_dir():
            for p in sorted(d.glob("*.md")):
                if p.name.lower() != "readme.md":
                    files[p.stem] = p
    return files


def role_sources(config: Config) -> list[Path]:
    """What the roles loaded from ``config`` come from: both roles folders (a file added or
    removed changes them) and each role's file. A snapshot (``App.save_snapshot``) and the
    server's reload (``delivery.server.current``) watch these."""
    return [builtin_dir("roles"), config.roles_dir, *role_files(config).values()]


def load_roles(config: Config) -> Roles:
    """Built-in roles overlaid by the project's roles dir, by file name."""
    return Roles(role_files(config), tuple(config.event_types), tuple(h.name for h in config.hosts))
