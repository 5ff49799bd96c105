"""Visibility at delivery: internal spaces reach members only, and their threads stay inside."""

from __future__ import annotations

import pytest

from helpers.project import Project
from workflow.core.errors import VisibilityError
from workflow.mail.message import Draft, build, make_message_id

REVIEWERS = ["spec-reviewer-panel.claude", "spec-reviewer-panel.gpt-5", "spec-reviewer-panel.gemini"]
WRITERS = ["spec-writer-panel.claude", "spec-writer-panel.gpt-5", "spec-writer-panel.gemini"]


def raw(
    sender: str, to: list[str], reply: str | None = None, refs: list[str] | None = None, cc: list[str] | None = None
) -> bytes:
    return build(
        Draft(
            sender=f"{sender}@workflow.local",
            to=[f"{t}@workflow.local" for t in to],
            cc=[f"{c}@workflow.local" for c in cc or []],
            subject="s",
            body="b",
            message_id=make_message_id(sender.split(".")[-1], "workflow.local"),
            event="question",
            artifacts=["specs/*/user-auth.md"],
            in_reply_to=reply,
            references=refs or ([reply] if reply else []),
        )
    )


def boxes_holding(p: Project, mid: str) -> set[str]:
    out = set()
    for f in p.new_files():
        if mid.encode() in f.read_bytes():
            out.add(f.parent.parent.name)
    return out


def test_internal_mail_reaches_members_only(project: Project) -> None:
    d = project.app.deliverer.deliver(
        raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"]), ["spec-reviewer-panel-internal"]
    )
    assert set(d.mailboxes) == set(REVIEWERS)
    assert boxes_holding(project, d.message_id) == set(REVIEWERS)


def test_non_member_may_not_send_to_internal(project: Project) -> None:
    with pytest.raises(VisibilityError, match="internal-members-only"):
        project.app.deliverer.deliver(
            raw("spec-writer-panel.claude", ["spec-reviewer-panel-internal"]), ["spec-reviewer-panel-internal"]
        )
    with pytest.raises(VisibilityError, match="internal-members-only"):
        project.send("spec-writer", "question", "specs/*/user-auth.md", "spec-reviewer-panel-internal", QUESTION="q")
    assert project.new_files() == []


def test_internal_mixed_with_outsider_refused(project: Project) -> None:
    m = raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"], cc=["spec-writer"])
    with pytest.raises(VisibilityError, match="internal-no-mixing.*spec-writer"):
        project.app.deliverer.deliver(m, ["spec-reviewer-panel-internal", "spec-writer"])
    assert project.new_files() == []


def test_internal_address_hidden_on_envelope_refused(project: Project) -> None:
    m = raw("spec-reviewer-panel.claude", ["spec-reviewer-panel.gpt-5"])
    with pytest.raises(VisibilityError, match="internal-named-in-headers"):
        project.app.deliverer.deliver(m, ["spec-reviewer-panel-internal"])


def test_header_says_internal_but_envelope_reaches_outsider(project: Project) -> None:
    m = raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"])
    with pytest.raises(VisibilityError, match="internal-no-mixing"):
        project.app.deliverer.deliver(m, ["spec-writer"])
    assert project.new_files() == []


@pytest.mark.parametrize(
    ("sender", "to"),
    [
        ("spec-reviewer-panel.claude", "spec-discussion"),  # a member dragging the thread cross-panel
        ("spec-reviewer-panel.claude", "spec-writer"),
        ("spec-writer-panel.claude", "spec-writer-panel-internal"),  # another panel citing it in its own space
        ("spec-writer", "spec-reviewer"),
    ],
)
def test_replies_into_internal_threads_stay_inside(project: Project, sender: str, to: str) -> None:
    inner = project.app.deliverer.deliver(
        raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"]), ["spec-reviewer-panel-internal"]
    )
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside.*new thread"):
        project.app.deliverer.deliver(raw(sender, [to], reply=inner.message_id), [to])
    # References alone (no In-Reply-To) count too.
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside"):
        project.app.deliverer.deliver(raw(sender, [to], refs=[inner.message_id]), [to])
    assert boxes_holding(project, inner.message_id) == set(REVIEWERS)


def test_reply_inside_internal_thread_allowed_and_cross_panel_new_thread_allowed(project: Project) -> None:
    inner = project.app.deliverer.deliver(
        raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"]), ["spec-reviewer-panel-internal"]
    )
    ok = project.app.deliverer.deliver(
        raw("spec-reviewer-panel.gpt-5", ["spec-reviewer-panel-internal"], reply=inner.message_id),
        ["spec-reviewer-panel-internal"],
    )
    assert set(ok.mailboxes) == set(REVIEWERS)
    cross = project.app.deliverer.deliver(raw("spec-reviewer-panel", ["spec-discussion"]), ["spec-discussion"])
    assert set(cross.mailboxes) == set(REVIEWERS + WRITERS)


def test_boundary_holds_after_index_is_deleted(project: Project) -> None:
    inner = project.app.deliverer.deliver(
        raw("spec-reviewer-panel.claude", ["spec-reviewer-panel-internal"]), ["spec-reviewer-panel-internal"]
    )
    for suffix in ("", "-wal", "-shm"):
        p = project.app.config.index_path.with_name("index.sqlite" + suffix)
        if p.exists():
            p.unlink()
    with pytest.raises(VisibilityError, match="internal-thread-stays-inside"):
        project.app.deliverer.deliver(
            raw("spec-reviewer-panel.claude", ["spec-discussion"], reply=inner.message_id), ["spec-discussion"]
        )


def test_who_reads_a_roles_runs(project: Project) -> None:
    """A run's log is its role's mail: read by who reads every mailbox of that role (the owner: all)."""
    from workflow.policy.visibility import Sight

    roster = project.app.roster
    reviewer = Sight.of(roster, "spec-reviewer")
    assert reviewer.reads_role("spec-reviewer") and not reviewer.reads_role("implementer")
    assert not reviewer.reads_role("spec-reviewer-panel")  # not a member
    member = Sight.of(roster, "spec-writer-panel.claude")
    assert member.reads_role("spec-writer-panel.claude") and not member.reads_role("spec-writer-panel")
    assert Sight.of(roster, "spec-writer-panel").reads_role("spec-writer-panel")  # through every member
    assert not reviewer.reads_role("a-role-gone")
    owner = Sight.of(roster, "spec-reviewer", owner=True)
    assert owner.reads_role("implementer") and owner.reads_role("a-role-gone")


def test_a_page_names_only_the_mail_its_viewer_reads(project: Project) -> None:
    from workflow.policy.visibility import Sight

    to_bob = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    mine = project.send("spec-reviewer", "question", "specs/proposed/user-auth.md", "spec-writer", QUESTION="q")
    other = project.send("spec-writer", "question", "specs/proposed/user-auth.md", "implementer", QUESTION="q")
    inside = project.send(
        "spec-writer-panel.claude", "question", "specs/*/user-auth.md", "spec-writer-panel-internal", QUESTION="q"
    )
    with project.app.index() as index:
        index.refresh()
        sight = Sight.of(project.app.roster, "spec-reviewer")
        assert sight.readable(index, [to_bob, mine, other, inside, None]) == {to_bob, mine}
        rows = {r.message_id: r for r in index.query(None)}
    assert sight.on_board(rows[other]) and not sight.on_board(rows[inside])  # a card counts it, unlinked
