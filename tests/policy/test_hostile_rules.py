"""Rules that hostile input bent: a sealed review reached through globs, a missing artifact or
another panel address; a false state claim hidden behind a dummy first artifact or a glob."""

from __future__ import annotations

import pytest

from helpers.project import Project
from helpers.smtp import message
from workflow.core.errors import GuardrailError
from workflow.mail.message import Draft, build
from workflow.panels.store import PanelStore


def verdict(sender: str, to: str, artifacts: list[str]) -> bytes:
    return message(sender, (to,), "status-update", artifacts=tuple(artifacts), extra=[("X-Review-Verdict", "approve")])


@pytest.fixture
def sealed(project: Project) -> Project:
    panel = project.app.config.panel("spec-reviewer-panel")
    assert panel is not None
    with PanelStore(project.app.config.state.panels) as store:
        store.open("<req@x>", panel, "specs/proposed/user-auth.md", "spec-writer")
    return project


@pytest.mark.parametrize(
    ("to", "artifacts"),
    [
        ("spec-reviewer-panel-internal", ["specs/*/user-aut?.md"]),
        ("spec-reviewer-panel-internal", ["specs/*/user-auth.md"]),
        ("spec-reviewer-panel-internal", ["specs/todo/user-auth.md"]),
        ("spec-reviewer-panel-internal", []),
        ("spec-reviewer-panel", ["specs/*/user-auth.md"]),
        ("spec-reviewer-panel.gpt-5", ["specs/*/user-auth.md"]),
        ("spec-reviewer-panel.claude", ["specs/proposed/user-auth.md"]),
    ],
)
def test_a_verdict_cannot_reach_a_sealed_panel_by_any_address_or_spelling(
    sealed: Project, to: str, artifacts: list[str]
) -> None:
    if not artifacts:  # a message with no X-Artifacts at all
        raw = verdict("spec-reviewer-panel.claude", to, ["x"]).replace(b"X-Artifacts: x\r\n", b"")
        assert b"X-Artifacts" not in raw
    else:
        raw = verdict("spec-reviewer-panel.claude", to, artifacts)
    with pytest.raises(GuardrailError, match="sealed-review: spec-reviewer-panel's review of specs/proposed"):
        sealed.app.deliverer.deliver(raw, [to])
    assert sealed.new_files() == []


def test_a_verdict_about_another_artifact_still_passes(sealed: Project) -> None:
    (sealed.dir / "specs" / "proposed" / "billing.md").write_text("# Billing\n")
    d = sealed.app.deliverer.deliver(
        verdict("spec-reviewer-panel.claude", "spec-reviewer-panel-internal", ["specs/*/billing.md"]),
        ["spec-reviewer-panel-internal"],
    )
    assert len(d.mailboxes) == 3


def claim(artifacts: list[str], state: str) -> bytes:
    return message("spec-reviewer", ("spec-writer",), "approval", artifacts=tuple(artifacts), state=state)


def test_every_artifact_named_is_judged_by_state_matches(project: Project) -> None:
    (project.dir / "specs" / "todo" / "dummy.md").write_text("# Dummy\n")
    with pytest.raises(
        GuardrailError, match=r"state-matches: artifact specs/\*/user-auth.md is in proposed/, message claims todo"
    ):
        project.app.deliverer.deliver(claim(["specs/todo/dummy.md", "specs/*/user-auth.md"], "todo"), ["spec-writer"])
    assert project.new_files() == []


def test_a_glob_over_artifacts_in_different_states_fits_no_single_claim(project: Project) -> None:
    (project.dir / "specs" / "todo" / "user-billing.md").write_text("# Billing\n")
    for state in ("todo", "proposed"):
        with pytest.raises(GuardrailError, match=r"state-matches: artifact specs/\*/user-\*.md \(specs/"):
            project.app.deliverer.deliver(claim(["specs/*/user-*.md"], state), ["spec-writer"])
    (project.dir / "specs" / "proposed" / "user-auth.md").rename(project.dir / "specs" / "todo" / "user-auth.md")
    d = project.app.deliverer.deliver(claim(["specs/*/user-*.md"], "todo"), ["spec-writer"])
    assert d.mailboxes == ("spec-writer",)


def test_status_shows_internal_mail_only_to_its_members(project: Project) -> None:
    from helpers.git import GIT_ENV

    inner = build(
        Draft(
            sender="spec-reviewer-panel.claude@workflow.local",
            to=["spec-reviewer-panel-internal@workflow.local"],
            subject="internal note",
            body="sealed thoughts",
            message_id="<internal.1@workflow.local>",
            event="status-update",
            artifacts=["specs/*/user-auth.md"],
        )
    )
    project.app.deliverer.deliver(inner, ["spec-reviewer-panel-internal"])
    project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    for args in (["status", "user-auth"], ["status", "--json"], ["status", "user-auth", "--as", "spec-writer"]):
        r = project.run(*args, env=GIT_ENV)
        assert r.returncode == 0, r.stderr
        assert "internal.1" not in r.stdout and "review-request" in r.stdout, args
    r = project.run("status", "user-auth", "--as", "spec-reviewer-panel.claude", env=GIT_ENV)
    assert r.returncode == 0 and "internal.1" in r.stdout


def test_doctor_fix_rebuilds_a_corrupt_index(project: Project) -> None:
    from helpers.git import GIT_ENV

    project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    path = project.app.config.index_path
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    r = project.run("doctor", env=GIT_ENV)
    assert r.returncode == 1 and "index-drift: index" in r.stdout and "[--fix: rebuild the index" in r.stdout
    r = project.run("doctor", "--fix", env=GIT_ENV)
    assert "fixed index-drift: rebuilt the index from the Maildirs (1 messages)" in r.stdout, r.stdout + r.stderr
    assert "index-drift" not in r.stdout.split("fixed index-drift")[1]
    r = project.run("inbox", "spec-reviewer", env=GIT_ENV)
    assert r.returncode == 0 and "review-request" in r.stdout.lower()
