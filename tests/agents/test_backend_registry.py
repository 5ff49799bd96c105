"""The backend registry: every backend declared once (core.backendkinds), each made by its maker,
named in the help and refusals that list them; and the bridge registry with its outbound bridge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.project import make_project
from workflow.agents.backends import MAKERS, chosen, make_backend
from workflow.agents.backends.profiles import PROFILES
from workflow.bridges.sections import BRIDGES, SECTIONS, bridge
from workflow.cli.main import cli
from workflow.core.backendkinds import BACKENDS, CLIS, KINDS, PROCESS, PROGRAMS
from workflow.core.config import load_config
from workflow.core.errors import ConfigError
from workflow.ops.scaffold import config_text, pick_backend
from workflow.policy.roster import outbound_bridge


def test_every_backend_is_declared_once_and_has_a_maker() -> None:
    assert len(set(BACKENDS)) == len(KINDS)
    assert set(MAKERS) == set(BACKENDS)
    assert set(CLIS) == set(PROFILES)  # every CLI profile is a backend, and every profile backend has one
    assert {n: p.kind.program for n, p in PROFILES.items()} == PROGRAMS
    assert all(n == p.kind.name and p.kind.cli is not None for n, p in PROFILES.items())
    assert set(CLIS) <= set(PROCESS) and "command" in PROCESS and "scripted" not in PROCESS


def test_make_backend_refuses_an_unknown_name_naming_the_known_ones() -> None:
    config = load_config(None, env={})
    with pytest.raises(ConfigError) as refused:
        make_backend(config, "aidr")
    assert "unknown backend 'aidr'" in str(refused.value)
    assert all(name in str(refused.value) for name in BACKENDS)
    assert type(make_backend(config, "codex")).__name__ == "CliBackend"


def test_every_backend_is_named_in_help_scaffold_and_refusals() -> None:
    config = load_config(None, env={})
    with pytest.raises(ConfigError) as none:
        chosen(config, "spec-writer", "")
    listing = CliRunner().invoke(cli, ["backends"], prog_name="workflow")
    assert listing.exit_code == 0, listing.output
    as_json = CliRunner().invoke(cli, ["backends", "--json"], prog_name="workflow")
    assert [k["name"] for k in json.loads(as_json.output)] == list(BACKENDS)
    scaffold = config_text(["specs"], "workflow.local", "/tmp/m")
    _, why = pick_backend({"PATH": ""})
    for kind in KINDS:
        assert f"  {kind.name} " in listing.output and kind.about in listing.output
        assert f'"{kind.name}"' in str(none.value) and f'"{kind.name}"' in why and f'"{kind.name}"' in scaffold


def test_the_bridges_are_listed_once_and_the_outbound_one_is_found_by_its_section(tmp_path: Path) -> None:
    assert [b.name for b in BRIDGES] == [s.name for s in SECTIONS]  # each runner has its registered section
    with pytest.raises(ConfigError, match="expected one of gmail, slack"):
        bridge("matrx")
    assert outbound_bridge(load_config(None, env={})) == ""
    p = make_project(tmp_path / "ob", '[bridges.gmail]\nimap_host = "x"\nuser = "u"\noutbound = true\n')
    assert outbound_bridge(p.app.config) == "gmail"
    assert p.app.roster.outbound == "bridge-outbound"
    listing = CliRunner().invoke(
        cli, ["--config", str(p.dir / "workflow.toml"), "bridge", "list"], prog_name="workflow"
    )
    assert listing.exit_code == 0, listing.output
    assert "gmail    configured outbound" in listing.output and "slack    off" in listing.output
