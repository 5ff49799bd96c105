"""The sandbox binds `[runs] readable` into every run, by default `~/.gitconfig` and the whole of
`~/.config/git` — where git's credential store keeps the owner's tokens (`credential.helper =
store` reads and writes `$XDG_CONFIG_HOME/git/credentials`). Every agent reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.hostile import agent_project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

AGENT = """\
import os, sys
from pathlib import Path
sys.stdin.read()
try:  # the sandbox's $HOME is the owner's path, an empty tmpfs — but for what [runs] readable binds
    Path("stolen").write_text(Path(os.path.expanduser("~/.config/git/credentials")).read_text())
except OSError:
    pass
finish("done", "nothing")
"""


@needs_bwrap
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="every run's agent reads the owner's git credential store through the default [runs] readable",
)
def test_an_agent_never_reads_the_owners_git_credentials(tmp_path: Path) -> None:
    store = Path(os.path.expanduser("~/.config/git/credentials"))
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text("https://owner:ghp_SECRETTOKEN@github.com\n")
    store.chmod(0o600)
    try:
        p = agent_project(tmp_path / "gc", AGENT)  # (a path in argv would be bound: none is given)
        r = run_command_role(p, "spec-reviewer")
        assert r.returncode == 0, r.stdout + r.stderr
        stolen = p.dir / "stolen"
        assert not stolen.exists() or "ghp_SECRETTOKEN" not in stolen.read_text(), "the agent read the token"
    finally:
        store.unlink()
