"""One safe open for every artifact: a symlink out of the artifact root is never read into a
prompt, written through, or reported as existing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project
from helpers.project import Project
from helpers.smtp import message
from workflow.agents.tools import RoleTools
from workflow.core.errors import GuardrailError, ToolError
from workflow.delivery.transport import make_transport
from workflow.panels.review import member_prompt

SECRET = "TOP-SECRET-OUTSIDE-THE-PROJECT"


@pytest.fixture
def evil(tmp_path: Path) -> Project:
    """A project with specs/proposed/evil.md committed as a symlink to a file outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    p = git_project(tmp_path / "evil")
    os.symlink(outside / "secret.txt", p.dir / "specs" / "proposed" / "evil.md")
    os.symlink(outside, p.dir / "specs" / "proposed" / "out")
    return p


def test_a_symlinked_artifact_never_reaches_the_prompt(evil: Project) -> None:
    evil.send("spec-writer", "review-request", "specs/proposed/evil.md", "spec-reviewer")
    r = evil.run("run-role", "--dry-run", "--with-email", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    assert "## specs/proposed/evil.md" not in r.stdout  # a symlink out of its root is no artifact of the project
    r = evil.run("status", env=GIT_ENV)
    assert r.returncode == 0 and "evil" not in r.stdout and "user-auth" in r.stdout
    panel = evil.app.config.panel("spec-reviewer-panel")
    assert panel is not None
    prompt = member_prompt(evil.app, panel, "claude", "specs/proposed/evil.md", "review it")
    assert SECRET not in prompt and "no such artifact" in prompt


def test_write_artifact_never_writes_through_a_symlink_out(evil: Project, tmp_path: Path) -> None:
    role = evil.app.roster.roles["spec-writer"]
    tools = RoleTools(evil.app, role, make_transport(evil.app.config, evil.app.deliverer, "direct"))
    for path in ("specs/proposed/evil.md", "specs/proposed/out/new.md"):
        with pytest.raises(ToolError, match="cannot write there"):
            tools.call("write_artifact", {"path": path, "content": "overwritten"})
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET
    assert not (tmp_path / "outside" / "new.md").exists()


def test_write_artifact_has_a_size_limit(project_factory: Callable[..., Project]) -> None:
    p = project_factory("\n[runs]\nmax_artifact_bytes = 1000\n")
    tools = RoleTools(p.app, p.app.roster.roles["spec-writer"], make_transport(p.app.config, p.app.deliverer, "direct"))
    with pytest.raises(ToolError, match="1001 bytes is more than the 1000 an artifact may have"):
        tools.call("write_artifact", {"path": "specs/proposed/big.md", "content": "x" * 1001})
    assert not (p.dir / "specs" / "proposed" / "big.md").exists()
    assert "wrote" in tools.call("write_artifact", {"path": "specs/proposed/big.md", "content": "x" * 1000})


def test_artifacts_exist_never_looks_outside_through_a_symlinked_directory(
    project_factory: Callable[..., Project], tmp_path: Path
) -> None:
    p = project_factory("[guardrails]\nartifacts_exist = true\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "present.md").write_text("x")
    os.symlink(outside, p.dir / "specs" / "proposed" / "out")
    raw = message(artifacts=("specs/proposed/out/present.md",))
    with pytest.raises(GuardrailError, match="artifacts-exist"):
        p.app.deliverer.deliver(raw, ["spec-reviewer"])


def test_where_an_artifact_is_now_never_counts_a_symlink_out_of_its_root(evil: Project, tmp_path: Path) -> None:
    from workflow.core.locate import Resolver, locate

    config = evil.app.config
    assert locate("specs/proposed/evil.md", config) == []
    assert Resolver(config).now("specs/todo/evil.md") == []
    os.symlink(
        config.project_dir / "specs" / "proposed" / "user-auth.md", config.project_dir / "specs" / "todo" / "inside.md"
    )
    assert locate("specs/proposed/inside.md", config) == []  # inside too: a symlink is never followed


def test_a_state_folder_that_is_a_symlink_out_of_its_root_holds_no_artifact(evil: Project, tmp_path: Path) -> None:
    """The server's locate checks each folder between the project and the file (no resolving of
    the whole path): a state folder replaced by a symlink out of the project must count as empty,
    and one pointing inside too (no symlink is followed, wherever it points)."""
    import shutil

    from workflow.core.locate import locate

    config = evil.app.config
    ghosts = tmp_path / "ghost-state"
    ghosts.mkdir()
    (ghosts / "ghost.md").write_text(SECRET)
    blocked = config.project_dir / "specs" / "blocked"
    shutil.rmtree(blocked, ignore_errors=True)
    os.symlink(ghosts, blocked)
    assert locate("specs/*/ghost.md", config) == []
    assert locate("specs/blocked/ghost.md", config) == []
    os.unlink(blocked)
    os.symlink(config.project_dir / "specs" / "proposed", blocked)  # inside the root: still not followed
    found = {a.path for a in locate("specs/*/user-auth.md", config)}
    assert found == {"specs/proposed/user-auth.md"}
