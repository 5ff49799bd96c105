"""Shared fixtures: a scratch project with real Maildirs (helpers.project), and the Dovecot fixture."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.dovecot import Dovecot
from helpers.project import Project, make_project
from helpers.tiers import mark


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "proj")


@pytest.fixture
def project_factory(tmp_path: Path) -> Callable[..., Project]:
    counter = iter(range(1000))
    return lambda extra="": make_project(tmp_path / f"proj{next(counter)}", extra)


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    """A real Dovecot on an ephemeral loopback port (tests that use it are marked needs_dovecot)."""
    base = Path(tempfile.mkdtemp(prefix="dovecot-"))  # pytest's own tmp dirs are 0700: Dovecot's users cannot enter
    os.chmod(base, 0o755)
    d = Dovecot(base / "d").start()
    try:
        yield d
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    """Every test run has its own owner credential and home (never the user's ~/.config, ~/.maildir)."""
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="workflow-test-config-")
    os.environ["HOME"] = tempfile.mkdtemp(prefix="workflow-test-home-")  # ~/.maildir is never the user's


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that start processes are marked ``slow`` (helpers.tiers); ``scripts/test --fast`` leaves them out.
    They run first, in their order, so that the workers of ``scripts/test`` end together on the quick ones."""
    mark(items)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
