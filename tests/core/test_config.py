"""Config: defaults, precedence of the mail root, and errors that name file, key and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow.bridges.gmail.settings import GmailConfig
from workflow.bridges.sections import SECTIONS
from workflow.bridges.slack.settings import SlackConfig
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
        # once accepted, then a TypeError loading it: refused at load like any unknown key
        ('[bridges.slack]\nescalate_to = "coordinator"\n', ["[bridges.slack] escalate_to", "unknown key"]),
    ],
)
def test_invalid_config_names_file_key_and_expectation(tmp_path: Path, toml: str, needles: list[str]) -> None:
    path = tmp_path / "workflow.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_config(path, env={}, plugins=SECTIONS)
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


GMAIL = '[bridges.gmail]\nimap_host = "imap.example.org"\nuser = "me@example.org"\n'
TYPOS = [
    # (toml, where the error points, what it says was expected)
    ('[workflow]\ndefault_sendr = "user"\n', "[workflow] default_sendr", "did you mean default_sender?"),
    ("[smtp]\nmax_conections = 3\n", "[smtp] max_conections", "did you mean max_connections?"),
    ('[artifacts]\ncommit_evnt = "status-update"\n', "[artifacts] commit_evnt", "did you mean commit_event?"),
    (
        '[panels.spec-reviewer-panel]\nmembers = ["a"]\nconsensus_rule = "majority"\n',
        "[panels.spec-reviewer-panel] consensus_rule",
        "unknown key",
    ),
    ("[agentd]\nmax_concurent = 3\n", "[agentd] max_concurent", "did you mean max_concurrent?"),
    ("[agentd]\nmax_concurrent = 0\n", "[agentd] max_concurrent", "an integer from 1 to 1000"),
    (
        '[agentd]\nrole_timeouts = { implementer = "long" }\n',
        "[agentd] role_timeouts",
        "a table of name = non-negative number",
    ),
    ('[agentd]\nbackend = "oracle"\n', "[agentd] backend", "'scripted', 'claude-code', 'codex' or 'gemini'"),
    ("[backends.anthropic]\nmax_token = 10\n", "[backends.anthropic] max_token", "did you mean max_tokens?"),
    ('[backends.command]\nargv = "claude -p"\n', "[backends.command] argv", "a non-empty list of strings"),
    ('[backends.scripted]\nrecord = "prompts"\n', "[backends.scripted] record", "unknown key"),
    ('[backends.antropic]\nmodel = "x"\n', "[backends.antropic]", "unknown backend (did you mean anthropic?)"),
    (GMAIL + "poll_intervall = 5\n", "[bridges.gmail] poll_intervall", "did you mean poll_interval?"),
    (GMAIL + 'smtp_tls = "maybe"\n', "[bridges.gmail] smtp_tls", "'starttls', 'ssl' or 'none'"),
    (
        GMAIL + '[bridges.gmail.agents.todo_forwarder]\nemial = "x@y"\n',
        "[bridges.gmail.agents.todo_forwarder] emial",
        "did you mean email?",
    ),
    (
        GMAIL + "[bridges.gmail.agents.summarizer]\nenabled = true\n",
        "[bridges.gmail.agents.summarizer]",
        "unknown agent",
    ),
    ('[bridges.gmail]\nuser = "me@example.org"\n', "[bridges.gmail]", "needs imap_host"),
    ("[bridges.slack]\nportt = 3000\n", "[bridges.slack] portt", "did you mean port?"),
    (
        '[bridges.slack]\nroles = { research = "Spec Writer" }\n',
        "[bridges.slack] roles",
        "a table of key = lower-case name",
    ),
    ("[bridges.teams]\nx = 1\n", "[bridges.teams]", "unknown bridge"),
]


@pytest.mark.parametrize(("toml", "where", "expected"), TYPOS, ids=[t[1] for t in TYPOS])
def test_a_typo_in_any_section_fails_at_load_naming_file_key_and_expectation(
    tmp_path: Path, toml: str, where: str, expected: str
) -> None:
    path = tmp_path / "workflow.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_config(path, env={}, plugins=SECTIONS)
    assert f"{path}: {where}" in str(e.value) and expected in str(e.value), str(e.value)


def test_every_section_is_read_into_typed_settings(tmp_path: Path) -> None:
    (tmp_path / "workflow.toml").write_text(
        '[agentd]\nmax_concurrent = 5\nrole_timeouts = { implementer = 3600 }\nroles = ["spec-reviewer"]\n'
        '[backends.command]\nargv = ["codex", "exec"]\ntimeout = 60\n'
        + GMAIL
        + '[bridges.gmail.agents.todo_forwarder]\nenabled = true\nemail = "t@todo.example"\n'
        '[bridges.slack]\nport = 0\nroles = { research = "spec-writer" }\n'
        "[guardrails]\nreviewer_decisions = false\nartifacts-exist = true\n"
    )
    c = load_config(cwd=tmp_path, env={}, plugins=SECTIONS)
    assert c.agentd.max_concurrent == 5 and c.agentd.role_timeouts["implementer"] == 3600.0
    assert c.agentd.roles == ("spec-reviewer",) and c.agentd.rescan == 30.0
    assert c.backends.command.argv == ("codex", "exec") and c.backends.anthropic.max_turns == 20
    gmail, slack = c.section(GmailConfig), c.section(SlackConfig)
    assert gmail is not None and gmail.imap_port == 993
    assert gmail.agents.todo_forwarder.enabled and gmail.agents.todo_forwarder.email == "t@todo.example"
    assert slack is not None and slack.roles == {"research": "spec-writer"}
    # one name per rule: the underscore spelling is read as the same key
    assert c.guardrails == {"reviewer-decisions": False, "artifacts-exist": True}  # the rules know the rest
    assert c.state.index == c.mail_root / ".workflow" / "index.sqlite"


def test_the_auth_users_file_is_read_as_the_mail_root_is(tmp_path: Path) -> None:
    """``~`` expanded and a relative path taken from the project, as mail_root (smtpd, doctor and
    imap all read the one path the config gives)."""
    (tmp_path / "workflow.toml").write_text('[smtp]\nauth_users_file = "~/.config/workflow/users"\n')
    assert load_config(cwd=tmp_path, env={}).smtp.auth_users_file == str(Path("~/.config/workflow/users").expanduser())
    (tmp_path / "workflow.toml").write_text('[smtp]\nauth_users_file = "secrets/users"\n')
    sub = tmp_path / "a"
    sub.mkdir()
    assert load_config(cwd=sub, env={}).smtp.auth_users_file == str(tmp_path / "secrets" / "users")
