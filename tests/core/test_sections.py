"""Sections: each workflow.toml section is declared once — a key validation accepts is a field of
its record and the reverse — and a key that is not a field is refused at load, not later."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import pytest

from workflow.bridges.sections import SECTIONS
from workflow.core.backendconfig import BACKENDS_TABLE
from workflow.core.errors import ConfigError
from workflow.core.schema import Int, Section, Tables, read
from workflow.core.sections import CORE_SECTIONS


def test_slack_escalate_to_is_refused_at_load_by_the_real_cli(tmp_path: Path) -> None:
    """Once accepted by the validator and then a ``TypeError`` building ``SlackConfig``: now a
    config error naming the key and the keys allowed, and no traceback."""
    (tmp_path / "workflow.toml").write_text('[bridges.slack]\nescalate_to = "coordinator"\n')
    env = {**os.environ, "WORKFLOW_MAIL_ROOT": str(tmp_path / "mail")}
    p = subprocess.run(
        [sys.executable, "-m", "workflow", "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and "TypeError" not in p.stderr, p.stderr
    assert f"{tmp_path / 'workflow.toml'}: [bridges.slack] escalate_to: unknown key" in p.stderr, p.stderr
    assert "default_role" in p.stderr and "bot_user_id" in p.stderr  # the keys it does take


# a value for each field that has no default a TOML file could spell (required, or None)
SAMPLES: dict[str, object] = {
    "imap_host": "imap.example.org",
    "user": "me@example.org",
    "members": ["a", "b"],
    "kind": "review",
    "primary": "a",
    "enabled": True,
}
FIXED: dict[str, object] = {"name": "spec-reviewer-panel", "artifact_kind": "spec"}


def _walk(name: str, section: Section[Any]) -> Iterator[tuple[str, Section[Any]]]:
    yield name, section
    for key, spec in section.specs.items():
        if isinstance(spec, Tables):
            for sub, inner in spec.sections.items():
                yield from _walk(f"{name}.{key}.{sub}", inner)


def every_section() -> list[tuple[str, Section[Any]]]:
    """Core's sections, every backend's and every registered plugin's, and the tables inside them:
    a section added to any registry is covered here without editing this test."""
    roots = [
        *CORE_SECTIONS.items(),
        *((f"backends.{n}", s) for n, s in BACKENDS_TABLE.sections.items()),
        *((f"{p.kind}.{p.name}", p.section) for p in SECTIONS),
    ]
    return [pair for name, section in roots for pair in _walk(name, section)]


def _toml(value: object) -> object:
    """A default as a TOML file spells it (tuples are arrays, records and mappings tables)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {}
    if isinstance(value, tuple):
        return [_toml(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


SECTION_LIST = every_section()


def test_the_registries_hold_every_section() -> None:
    names = {n for n, _ in SECTION_LIST}
    assert {"smtp", "agentd", "panels.NAME", "backends.command", "bridges.gmail", "bridges.slack"} <= names
    assert "bridges.gmail.agents.todo_forwarder" in names  # a table inside a plugin's table


@pytest.mark.parametrize(("name", "section"), SECTION_LIST, ids=[n for n, _ in SECTION_LIST])
def test_every_key_validation_accepts_is_a_field_and_every_field_a_key(name: str, section: Section[Any]) -> None:
    record = section.type
    assert set(section.specs) | section.fixed == set(record._fields)
    assert not set(section.specs) & section.fixed
    required = {f: SAMPLES[f] for f in record._fields if f not in record._field_defaults and f not in section.fixed}
    fixed = {f: FIXED[f] for f in section.fixed}
    for key in section.specs:
        default = record._field_defaults.get(key)
        value = SAMPLES[key] if default is None else _toml(default)
        got = read("t.toml", name, {**required, key: value}, section, **fixed)
        assert isinstance(got, record)  # the key was taken and became the field: no TypeError
        if default is not None:
            assert getattr(got, key) == default, f"[{name}] {key}: its default does not pass its own spec"
    with pytest.raises(ConfigError, match=rf"\[{re.escape(name)}\] not_a_field: unknown key"):
        read("t.toml", name, {**required, "not_a_field": 1}, section, **fixed)


def test_every_table_a_registry_accepts_lands_in_its_container() -> None:
    """[backends.NAME] becomes BackendsConfig (an agent CLI's in its clis), [bridges.gmail.agents.NAME]
    GmailAgents: a table a registry accepts has a place to land (no TypeError building it)."""
    containers = [BACKENDS_TABLE, *(s for _, sec in SECTION_LIST for s in sec.specs.values() if isinstance(s, Tables))]
    for tables in containers:
        for name in tables.sections:
            assert tables.read_in("t.toml", "x", {name: {}}) is not None


def test_a_field_without_its_check_cannot_be_declared() -> None:
    """The drift that let escalate_to through cannot be written: a record's field either carries
    its spec (and is then a key) or the section is refused when it is declared."""

    class Loose(NamedTuple):
        port: Annotated[int, Int(0, 65535)] = 3000
        escalate_to: str = "coordinator"

    with pytest.raises(TypeError, match=r"Loose\.escalate_to: declare it as Annotated"):
        Section(Loose)
