"""Every command's help and argument errors, in-process with click's CliRunner (end-to-end runs stay subprocesses)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from helpers.project import Project
from workflow.cli import agentd as agentd_cli
from workflow.cli import notify as notify_cli
from workflow.cli import run as run_cli
from workflow.cli.main import COMMANDS, cli


def walk(
    group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, ctx, (*prefix, name))


COMMAND_PATHS = sorted(path for path, _ in walk(cli, click.Context(cli)))
SCRIPTS = {"workflow-notify": notify_cli.script, "run-role": run_cli.script, "agentd": agentd_cli.script}


def test_the_registry_lists_every_command_and_each_loads() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    assert cli.get_command(ctx, "no-such-command") is None
    assert len(COMMAND_PATHS) > len(COMMANDS)  # the groups' subcommands are there too


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_every_command_has_help_ending_with_an_example(path: tuple[str, ...]) -> None:
    r = CliRunner().invoke(cli, [*path, "--help"], prog_name="workflow")
    assert r.exit_code == 0, r.output
    assert f"Usage: workflow {' '.join(path)}" in r.output
    assert "Example:" in r.output


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_an_unknown_option_is_a_usage_error(path: tuple[str, ...]) -> None:
    r = CliRunner().invoke(cli, [*path, "--no-such-option"], prog_name="workflow")
    assert r.exit_code == 2, r.output
    assert "No such option" in r.output and "--no-such-option" in r.output


REQUIRED = [
    (path, [p.name for p in cmd.params if isinstance(p, click.Argument) and p.required])
    for path, cmd in walk(cli, click.Context(cli))
    if not isinstance(cmd, click.Group) and any(isinstance(p, click.Argument) and p.required for p in cmd.params)
]


@pytest.mark.parametrize(("path", "names"), REQUIRED, ids=[" ".join(p) for p, _ in REQUIRED])
def test_a_missing_argument_is_named(path: tuple[str, ...], names: list[str], tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["--config", str(tmp_path / "none.toml"), *path], prog_name="workflow")
    assert r.exit_code == 2, r.output
    assert f"Missing argument {names[0].upper()!r}" in r.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["notify", "--via", "pigeon", "question", "specs/*/a.md", "coordinator"], "Invalid value for '--via'"),
        (["run-role", "--backend", "oracle", "--with-email", "spec-reviewer"], "Invalid value for '--backend'"),
        (["hooks", "run", "pre-push"], "Invalid value for 'HOOK'"),
        (["agentd", "requeue", "forty-two"], "'forty-two' is not a valid integer"),
        (["search", "x", "--limit", "many"], "'many' is not a valid integer"),
    ],
)
def test_a_bad_value_names_the_option(args: list[str], needle: str) -> None:
    r = CliRunner().invoke(cli, args, prog_name="workflow")
    assert r.exit_code == 2 and needle in r.output, r.output


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_standalone_scripts_take_the_root_options_and_the_same_arguments(name: str) -> None:
    script = SCRIPTS[name]
    r = CliRunner().invoke(script, ["--help"], prog_name=name)
    assert r.exit_code == 0 and "Example:" in r.output, r.output
    assert "--config" in r.output and "--mail-root" in r.output
    sub = cli.get_command(click.Context(cli), "run-role" if name == "run-role" else name.replace("workflow-", ""))
    assert sub is not None
    names = [p.name for p in script.params]
    assert names[:3] == ["config_path", "mail_root", "version"]
    assert sorted(p.name or "" for p in sub.params) == sorted(n or "" for n in names if n != "version")


def test_a_workflow_error_is_one_line_and_its_exit_code(project: Project) -> None:
    cfg = str(project.dir / "workflow.toml")
    r = CliRunner().invoke(cli, ["--config", cfg, "inbox", "spec-reveiwer"], prog_name="workflow")
    assert r.exit_code == 5  # RosterError
    assert len(r.output.strip().splitlines()) == 1 and r.output.startswith("Error: unknown role 'spec-reveiwer'"), (
        r.output
    )
    assert "did you mean spec-reviewer, " in r.output  # a role is expected: roles are suggested
    r = CliRunner().invoke(notify_cli.script, ["--config", cfg, "--stdout", "party", "specs/*/a.md", "coordinator"])
    assert r.exit_code == 4 and "unknown event type 'party'" in r.output, r.output


def test_a_config_typo_fails_every_command_at_load(project: Project) -> None:
    cfg = project.dir / "workflow.toml"
    cfg.write_text(cfg.read_text() + "\n[agentd]\nmax_concurent = 3\n")
    for args in (["roster"], ["inbox", "spec-reviewer"], ["guardrails"]):
        r = CliRunner().invoke(cli, ["--config", str(cfg), *args], prog_name="workflow")
        assert r.exit_code == 3, r.output
        assert f"{cfg}: [agentd] max_concurent: unknown key (did you mean max_concurrent?)" in r.output


def _example_lines(cmd: click.Command) -> list[str]:
    text = cmd.help or ""
    _, _, after = text.partition("Example:")
    return [ln.strip() for ln in after.splitlines() if ln.strip()]


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_help_examples_stay_on_one_line_and_every_option_says_what_it_does(path: tuple[str, ...]) -> None:
    """Copied from --help on an 80-column terminal, an example runs as written: click must not
    re-wrap it (each is in a \\b block). Every option has help text."""
    ctx = click.Context(cli)
    cmd: click.Command | None = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.get_command(ctx, name)
    assert cmd is not None
    r = CliRunner().invoke(cli, [*path, "--help"], prog_name="workflow", terminal_width=80)
    shown = {ln.strip() for ln in r.output.splitlines()}
    for line in _example_lines(cmd):
        assert line in shown, (line, r.output)
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name != "help":
            assert p.help, f"{' '.join(path)} {p.opts[0]} has no help text"


def test_global_options_after_any_subcommand_and_version_everywhere(project: Project, tmp_path: Path) -> None:
    cfg = str(project.dir / "workflow.toml")
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    before = CliRunner().invoke(cli, ["--config", cfg, "inbox", "spec-reviewer"], prog_name="workflow")
    after = CliRunner().invoke(cli, ["inbox", "spec-reviewer", "--config", cfg], prog_name="workflow")
    assert before.exit_code == after.exit_code == 0, after.output
    assert after.output == before.output and "1 unread message" in after.output
    r = CliRunner().invoke(cli, ["agentd", "status", "--config", cfg, "--mail-root", str(project.mail)])
    assert r.exit_code == 3 and "not running" in r.output, r.output  # found the project: agentd is simply not up
    r = CliRunner().invoke(
        notify_cli.script, ["--stdout", "review-request", "specs/*/user-auth.md", "spec-reviewer", "--config", cfg]
    )
    assert r.exit_code == 0 and "X-Event-Type: review-request" in r.output, r.output
    for script, prog in ((cli, "workflow"), *((s, n) for n, s in SCRIPTS.items())):
        r = CliRunner().invoke(script, ["--version"], prog_name=prog)
        assert r.exit_code == 0 and r.output.startswith(f"{prog}, version "), (prog, r.output)
