"""agentd's warm fork server imports what its roles' backends need once (``Kind.preload``), so a
run of an anthropic role does not import the SDK (1–2 s here) again on every wake."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from helpers.project import make_project
from workflow.agentd.daemon import preload
from workflow.app import App
from workflow.bridges.sections import SECTIONS
from workflow.core.backendkinds import KINDS
from workflow.core.config import load_config


@pytest.mark.parametrize("k", [k for k in KINDS if k.preload], ids=lambda k: k.name)
def test_every_preloaded_module_imports(k: object) -> None:
    """The fork server drops a module it cannot import without a word: a misspelt one would only cost time."""
    for name in k.preload:  # type: ignore[attr-defined]
        importlib.import_module(name)


def test_an_anthropic_project_preloads_the_sdk_a_scripted_one_nothing(tmp_path: Path) -> None:
    scripted = make_project(tmp_path / "scripted")
    roles = list(scripted.app.roster.roles)
    assert preload(scripted.app, roles) == []
    assert "anthropic" in preload(scripted.app, roles, "anthropic")  # `agentd run --backend anthropic`
    toml = scripted.dir / "workflow.toml"
    toml.write_text(toml.read_text().replace('backend = "scripted"', 'backend = "anthropic"'))
    app = App(load_config(toml, env={}, plugins=SECTIONS))
    got = preload(app, roles)
    assert got.count("anthropic") == 1 and "workflow.agents.backends.anthropic_api" in got  # once for all roles
    assert preload(app, roles, "scripted") == []
