"""The agent-CLI registry: each agent CLI is one record (``core.backendkinds``: its ``Kind`` and
``Cli``; ``agents.backends.profiles``: its behaviour, holding that ``Kind``), and no module keeps a
table of CLIs of its own — a table keyed by a CLI's name, or one listing what two CLIs need (their
state variables, credentials, settings folders), would be a place a new CLI could be forgotten."""

from __future__ import annotations

import ast
from pathlib import Path

from workflow.agents.backends.command import TRANSCRIPTS
from workflow.agents.backends.login import missing, no_credential
from workflow.agents.backends.profiles import ALL, PROFILES, Plan
from workflow.agents.modelapi import APIS
from workflow.artifacts.agentfiles import FOLDERS
from workflow.core.backendkinds import CLI_KINDS, CLIS, KINDS, Cli
from workflow.core.config import CliConfig, load_config
from workflow.core.sections import MODEL_ENV

ROOT = Path(__file__).resolve().parents[2]


def _records() -> list[tuple[str, Cli]]:
    return [(k.name, k.cli) for k in CLI_KINDS if k.cli is not None]


def _marks() -> dict[str, str]:
    """Every string that names one CLI or a thing only it needs → that CLI."""
    out: dict[str, str] = {}
    for name, cli in _records():
        for mark in (name, cli.program, cli.state, cli.state_env, *cli.credentials, *cli.folders):
            out[mark] = name
    return out


def _tables(tree: ast.AST) -> list[int]:
    """Lines of literals that key a dict by a CLI's name (or its program or state folder), or list
    (as keys, items or keyword arguments) what two CLIs or more need."""
    marks = _marks()
    names = {m for name, cli in _records() for m in (name, cli.program, cli.state)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            found = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        elif isinstance(node, ast.Call):
            found = {k.arg for k in node.keywords if k.arg}
        else:
            continue
        if (isinstance(node, ast.Dict) and found & names) or len({marks[m] for m in found if m in marks}) >= 2:
            out.append(node.lineno)
    return out


def test_no_module_keeps_a_table_of_agent_clis_but_the_registry() -> None:
    skip = {
        ROOT / "workflow" / "core" / "backendkinds.py",  # the registry
        ROOT / "workflow" / "ops" / "demo.py",  # the demo panel's members are models ("claude", "gemini"), no CLIs
    }
    found = {
        str(f.relative_to(ROOT)): lines
        for f in sorted((ROOT / "workflow").rglob("*.py"))
        if f not in skip and (lines := _tables(ast.parse(f.read_text())))
    }
    assert found == {}, f"tables of agent CLIs outside workflow/core/backendkinds.py: {found}"
    # the check sees each kind of table
    assert _tables(ast.parse('HINT = {"codex": "an OpenAI API key"}')) == [1]
    assert _tables(ast.parse('for sub in ("claude", "codex"): pass')) == [1]
    assert _tables(ast.parse("env.update(CLAUDE_CONFIG_DIR=a, CODEX_HOME=b)")) == [1]
    assert _tables(ast.parse('FOLDERS = frozenset({".claude", ".gemini", ".cursor"})')) == [1]
    assert _tables(ast.parse('ok = kind in ("gemini", "user")')) == []  # one CLI's word is no table


def test_each_cli_is_one_record_its_profile_holds() -> None:
    assert [p.kind for p in ALL] == list(CLI_KINDS) and tuple(PROFILES) == CLIS
    assert all(k in KINDS and k.process and k.profile and k.api[0] for k in CLI_KINDS)
    for name, cli in _records():
        assert cli.program and cli.state and cli.state_env and cli.credentials and cli.login_hint, name
        assert cli.folders and set(cli.folders) <= FOLDERS, name  # what it obeys in the tree, guarded
        assert set(cli.credentials) | set(cli.env) <= set(MODEL_ENV), name  # its agents get them by default
        assert cli.sessions in TRANSCRIPTS and APIS[name] == PROFILES[name].kind.api, name
    assert len({cli.state for _, cli in _records()}) == len({cli.state_env for _, cli in _records()}) == len(CLIS)


def test_a_profile_names_its_state_folder_by_its_records_variable(tmp_path: Path) -> None:
    for name, cli in _records():
        plan = Plan(str(tmp_path / "tools.sock"), tmp_path / name)
        launch = PROFILES[name].launch(CliConfig(), plan)
        assert launch.env[cli.state_env] == str(tmp_path / name / cli.state), name
        assert launch.argv[0] == cli.program, name


def test_the_login_line_is_the_records() -> None:
    config = load_config(None, env={})
    for name, cli in _records():
        line = missing(name, config, {})
        assert line == no_credential(name) and cli.login_hint in line and " or ".join(cli.credentials) in line
        assert missing(name, config, {cli.credentials[-1]: "k"}) == "", name
    assert missing("anthropic", config, {}) == ""  # no agent CLI
