"""Property tests of the hostile-input fixes: reply headers with many ids in any order and case,
From: display names that look like addresses, and trees of symlinks in and out of the roots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.project import Project
from helpers.smtp import message
from workflow.core import safeopen
from workflow.core.errors import ArtifactError, VisibilityError
from workflow.core.locate import scan
from workflow.mail.message import parse

INTERNAL = "spec-reviewer-panel-internal"
ids = st.from_regex(r"<[a-z0-9.]{1,12}@[a-z]{1,8}\.example>", fullmatch=True)
roles = st.sampled_from(["spec-writer", "spec-reviewer", "user", "coordinator", "spec-reviewer-panel-internal"])


@pytest.fixture
def inner(project: Project) -> str:
    return project.app.deliverer.deliver(message("spec-reviewer-panel.claude", (INTERNAL,)), [INTERNAL]).message_id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    others=st.lists(ids, max_size=5),
    position=st.integers(0, 5),
    where=st.sampled_from(["in-reply-to", "references", "both"]),
    upper=st.booleans(),
)
def test_an_internal_id_anywhere_in_the_reply_headers_is_caught(
    project: Project, inner: str, others: list[str], position: int, where: str, upper: bool
) -> None:
    mid = inner.upper().replace("@WORKFLOW.LOCAL", "@workflow.local") if upper else inner
    chain = list(others)
    chain.insert(min(position, len(chain)), mid)
    head = " ".join(chain)
    lines = b""
    if where in ("in-reply-to", "both"):
        lines += f"In-Reply-To: {head}\r\n".encode()
    if where in ("references", "both"):
        lines += f"References: {head}\r\n".encode()
    raw = message("spec-reviewer-panel.claude", ("spec-writer",)).replace(b"Subject: ", lines + b"Subject: ", 1)
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside"):
        project.app.deliverer.deliver(raw, ["spec-writer"])


@settings(max_examples=200, deadline=None)
@given(shown=roles, actual=roles, quote=st.booleans(), comment=st.booleans())
def test_from_is_its_addr_spec_whatever_the_display_name_says(
    shown: str, actual: str, quote: bool, comment: bool
) -> None:
    display = f'"{shown}@workflow.local"' if quote else f"{shown} at workflow.local"
    value = f"{display} <{actual}@workflow.local>" + (f" ({shown}@workflow.local)" if comment else "")
    raw = f"From: {value}\r\nTo: x@workflow.local\r\nSubject: s\r\n\r\nb\r\n".encode()
    assert parse(raw).sender == f"{actual}@workflow.local"


names = st.sampled_from(["a", "b", "c", "d.md", "e.md"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    links=st.lists(
        st.tuples(
            st.lists(names, min_size=1, max_size=3), st.sampled_from(["out-file", "out-dir", "in-file", "in-dir"])
        ),
        max_size=6,
    )
)
def test_no_symlink_tree_reaches_outside_the_root(project: Project, tmp_path: Path, links: list) -> None:  # type: ignore[type-arg]
    outside = tmp_path / "outside"
    shutil.rmtree(outside, ignore_errors=True)
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text("SECRET")
    (outside / "dir" / "secret.md").write_text("SECRET")
    base = project.dir / "specs" / "proposed" / "tree"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    (base / "inside.md").write_text("inside")
    targets = {
        "out-file": outside / "secret.md",
        "out-dir": outside / "dir",
        "in-file": base / "inside.md",
        "in-dir": project.dir / "specs" / "todo",
    }
    for parts, kind in links:
        link = base.joinpath(*parts)
        ancestors = [base.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if any(a.is_symlink() or a.is_file() for a in ancestors):
            continue  # build the tree only through real directories
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists() and not link.is_symlink():
            os.symlink(targets[kind], link)
    for dirpath, _, files in os.walk(base, followlinks=True):
        if os.path.realpath(dirpath).startswith(str(outside)) and dirpath.count("/") > 40:
            break
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), project.dir)
            try:
                data = safeopen.read(project.app.config, rel)
            except ArtifactError:
                continue
            assert data != b"SECRET", rel
    for a in scan(project.app.config):
        assert safeopen.exists(project.app.config, a.path), a.path
