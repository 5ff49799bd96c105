"""Fixtures of the web tests: a git project where bob, a person, takes the spec-reviewer role, and
a real `workflow web` over it (with its SMTP server where a test sends over TCP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.git import git_project, sh
from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Server, add_person, web_server

HUMAN_REVIEWER = '+++\nmode = "human"\ndescription = "bob reviews specs in the browser"\n+++\n\n# spec-reviewer\n'


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = git_project(tmp_path / "w")
    (p.dir / "roles" / "spec-reviewer.md").write_text(HUMAN_REVIEWER)
    (p.dir / "specs" / "proposed" / "billing.md").write_text("# billing\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "bob reviews; billing")
    add_person(p, BOB, BOB_PASSWORD, "spec-reviewer")
    return p


@pytest.fixture
def server(project: Project) -> Iterator[Server]:
    with web_server(project) as s:
        yield s
