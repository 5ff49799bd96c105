"""Pages in-process: ``Boards`` — the board kept up to date from what changed — shows what
``pages.board``, made from every row, shows, through deliveries, a move, a deletion and panel mail."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers.project import Project, make_project
from helpers.smtp import message
from workflow.web import pages

MEMBER = "spec-reviewer-panel.gpt-5"  # receives the panel's internal mail
OUTSIDER = "spec-writer"
INTERNAL = "spec-reviewer-panel-internal"


def same(boards: pages.Boards, project: Project) -> dict[str, pages.Board]:
    """Each role's kept board, checked against the reference made whole."""
    out = {}
    for role in (MEMBER, OUTSIDER):
        out[role] = boards.board(role)
        assert out[role] == pages.board(project.app, role), role
    return out


def card(board: pages.Board, name: str) -> pages.CardView:
    return next(c for c in board.cards if c.name == name)


def test_the_kept_board_is_the_board_made_whole(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    (project.dir / "specs" / "todo" / "billing.md").write_text("# billing\n")
    deliver = project.app.deliverer.deliver
    boards = pages.Boards(project.app)
    first = same(boards, project)

    asked = deliver(message("spec-writer", ("spec-reviewer",), "question"), ["spec-reviewer"]).message_id
    after = same(boards, project)
    assert card(after[OUTSIDER], "user-auth.md").waiting[0].message_id == asked
    # only the card the new mail names was made again
    assert card(after[OUTSIDER], "billing.md") is card(first[OUTSIDER], "billing.md")

    # one message to two mailboxes: one row on the card; then a reply answers the question
    deliver(
        message("coordinator", ("spec-writer", "spec-reviewer"), "review-request", artifacts=("specs/*/billing.md",)),
        ["spec-writer", "spec-reviewer"],
    )
    deliver(message("spec-reviewer", ("spec-writer",), "answer", in_reply_to=asked), ["spec-writer"])
    after = same(boards, project)
    assert card(after[OUTSIDER], "user-auth.md").waiting == ()

    # a copy of the question put first in another mailbox: it is now the copy the card shows
    q = next(f for f in project.new_files("spec-reviewer") if asked.encode() in f.read_bytes())
    early = project.mail / "spec-writer" / "new" / "0000000001.M1P1.first"
    shutil.copy(q, early)
    same(boards, project)

    # the artifact moves: its card shows it in doing/, the mail still on it
    (project.dir / "specs" / "proposed" / "user-auth.md").rename(project.dir / "specs" / "doing" / "user-auth.md")
    after = same(boards, project)
    assert card(after[OUTSIDER], "user-auth.md").state == "doing"

    # that copy deleted: the card shows the first one again
    early.unlink()
    same(boards, project)

    # internal panel mail: on the member's board, not on anyone else's
    inner = deliver(message("spec-reviewer-panel.claude", (INTERNAL,), "question"), [INTERNAL]).message_id
    after = same(boards, project)
    assert inner in {r.message_id for r in card(after[MEMBER], "user-auth.md").latest}
    assert inner not in {r.message_id for r in card(after[OUTSIDER], "user-auth.md").latest}
