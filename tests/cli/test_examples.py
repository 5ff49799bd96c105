"""Every example in the README, in docs/ and in every --help parses as written, and the read-only ones run.

Each command line in a ```bash block of README.md or of a docs/ page and after ``Example:`` in each command's help
is parsed by the real click commands (an unknown option, a missing argument or a bad value
fails the test, naming the line); the ones that only read (status, roster, route, inbox,
search, guardrails, doctor…) also run in a test project and must not end in a usage error.
"""

from __future__ import annotations

import re
import shlex
import warnings
from collections.abc import Iterator

import click
import pytest

from helpers.project import ROOT, Project
from workflow.cli import agentd as agentd_cli
from workflow.cli import notify as notify_cli
from workflow.cli import run as run_cli
from workflow.cli.main import cli

PROGRAMS: dict[str, click.Command] = {
    "workflow": cli,
    "workflow-notify": notify_cli.script,
    "run-role": run_cli.script,
    "agentd": agentd_cli.script,
}
OPERATORS = ("|", "||", "&&", ";", "&")  # between the commands of one line
READ_ONLY = {"status", "roster", "route", "guardrails", "events", "inbox", "search", "doctor"}


def _lines(text: str) -> Iterator[str]:
    """Command lines of a shell snippet: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        segment: list[str] = []
        for word in [*shlex.split(line, comments=True), ";"]:  # each command of a list or a pipeline
            if word not in OPERATORS:
                segment.append(word)
                continue
            words, segment = segment, []
            while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value before the command
                words.pop(0)
            redirect = next((i for i, w in enumerate(words) if w in ("<", ">", ">>", "2>", "2>>")), len(words))
            words = words[:redirect]  # the command, without where its input comes from or its output goes
            if len(words) > 1 and words[0] in PROGRAMS and "<<<" not in words:
                yield shlex.join(words)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_examples() -> list[str]:
    """The command lines of every ```bash block of the README and the docs/ pages."""
    blocks = [b for page in PAGES for b in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)]
    return sorted({line for b in blocks for line in _lines(b)})


def help_examples() -> list[str]:
    out = set()

    def walk(group: click.Group, ctx: click.Context) -> Iterator[click.Command]:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is not None:
                yield cmd
                if isinstance(cmd, click.Group):
                    yield from walk(cmd, ctx)

    for cmd in [cli, *walk(cli, click.Context(cli)), *PROGRAMS.values()]:
        _, _, after = (cmd.help or "").partition("Example:")
        out.update(_lines(after))
    return sorted(out)


def _left(ctx: click.Context) -> list[str]:
    """What a group's context left for its subcommand (click 8 keeps the name apart, click 9 not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [*getattr(ctx, "protected_args", []), *ctx.args]


def parse(line: str) -> None:
    """Parse ``line`` with the real commands, down to the last subcommand."""
    words = shlex.split(line)
    cmd: click.Command = PROGRAMS[words[0]]
    ctx = cmd.make_context(words[0], words[1:])
    while isinstance(cmd, click.Group) and (left := _left(ctx)):
        name, sub, rest = cmd.resolve_command(ctx, left)
        assert sub is not None and name is not None, line
        cmd, ctx = sub, sub.make_context(name, rest, parent=ctx)


EXAMPLES = sorted(set(readme_examples()) | set(help_examples()))


def test_the_examples_are_many() -> None:
    assert len(readme_examples()) > 40 and len(help_examples()) > 30


@pytest.mark.parametrize("line", EXAMPLES)
def test_every_example_parses_as_written(line: str) -> None:
    try:
        parse(line)
    except click.exceptions.Exit as e:  # --help: parsed, shown, done
        assert e.exit_code == 0 and "--help" in line.split(), line
    except click.BadParameter as e:
        if "does not exist" not in str(e):  # a placeholder path (a conversation's ID) is fine to name
            raise AssertionError(f"{line}: {e.format_message()}") from None
    except click.UsageError as e:
        raise AssertionError(f"{line}: {e.format_message()}") from None


@pytest.mark.parametrize("line", [x for x in EXAMPLES if x.split()[0] == "workflow" and x.split()[1] in READ_ONLY])
def test_the_read_only_examples_run_in_a_project(project: Project, line: str) -> None:
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="refresh token")
    words = shlex.split(line)
    r = project.run(*words[1:])
    assert r.returncode not in (2, 3), (line, r.stderr)  # no usage error, the project is found
    assert "Traceback" not in r.stderr, r.stderr
