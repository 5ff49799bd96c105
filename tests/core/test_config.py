"""Config: defaults, precedence of the mail root, and errors that name file, key and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow.core.config import DEFAULT_EVENTS, DEFAULT_STATES, load_config
from workflow.core.errors import ConfigError


def test_defaults_without_a_config_file(tmp_path: Path) -> None:
    c = load_config(cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert c.path is None
    assert c.domain == "workflow.local"
    assert c.states == DEFAULT_STATES and c.event_types == DEFAULT_EVENTS
    assert c.smtp.host == "127.0.0.1" and c.smtp.port == 8025
    assert c.mail_root == Path("~/.maildir/workflow").expanduser().resolve()


def test_mail_root_precedence(tmp_path: Path) -> None:
    (tmp_path / "workflow.toml").write_text('[workflow]\nmail_root = "from-config"\n')
    assert load_config(cwd=tmp_path, env={}).mail_root == tmp_path / "from-config"
    env = {"WORKFLOW_MAIL_ROOT": str(tmp_path / "from-env")}
    assert load_config(cwd=tmp_path, env=env).mail_root == tmp_path / "from-env"
    assert load_config(cwd=tmp_path, env=env, mail_root=tmp_path / "flag").mail_root == tmp_path / "flag"


def test_config_found_above_cwd(tmp_path: Path) -> None:
    (tmp_path / "workflow.toml").write_text('[workflow]\ndomain = "example.test"\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    c = load_config(cwd=sub, env={})
    assert c.domain == "example.test" and c.project_dir == tmp_path


@pytest.mark.parametrize(
    ("toml", "needles"),
    [
        ('[workflow]\ndomain = "Not A Domain"\n', ["[workflow] domain", "expected a string matching"]),
        ("[smtp]\nport = 70000\n", ["[smtp] port", "an integer from 0 to 65535", "70000"]),
        ('[smtp]\nport = "25"\n', ["[smtp] port", "'25'"]),
        ("[workflow]\nstates = []\n", ["[workflow] states", "non-empty list"]),
        ('[workflow]\ncolour = "blue"\n', ["[workflow] colour", "unknown key"]),
        ("[mystery]\nx = 1\n", ["[mystery]", "unknown section"]),
        ("[panels.spec-reviewer-panel]\nmembers = []\n", ["[panels.spec-reviewer-panel] members", "non-empty list"]),
        (
            '[panels.spec-reviewer-panel]\nmembers = ["a"]\nconsensus = "vibes"\n',
            ["consensus", "'unanimous', 'majority' or 'any-reject'"],
        ),
        ('[panels.reviewers]\nmembers = ["a"]\n', ["[panels.reviewers]", "spec-reviewer-panel"]),
        ('[panels.spec-writer-panel]\nmembers = ["a"]\nprimary = "b"\n', ["primary", "one of the members"]),
        ("[workflow\n", ["invalid TOML"]),
    ],
)
def test_invalid_config_names_file_key_and_expectation(tmp_path: Path, toml: str, needles: list[str]) -> None:
    path = tmp_path / "workflow.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_config(path, env={})
    msg = str(e.value)
    assert str(path) in msg
    for n in needles:
        assert n in msg


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", env={})


def test_panels_parsed(tmp_path: Path) -> None:
    (tmp_path / "workflow.toml").write_text(
        '[panels.spec-reviewer-panel]\nmembers = ["claude", {name = "gpt-5", backend = "command", model = "gpt-5"}]\n'
    )
    c = load_config(cwd=tmp_path, env={})
    p = c.panel("spec-reviewer-panel")
    assert p is not None and p.kind == "review" and p.artifact_kind == "spec"
    assert p.mailboxes == ("spec-reviewer-panel.claude", "spec-reviewer-panel.gpt-5")
    assert p.members[1].backend == "command"
