"""The board agrees with git: a move a role committed (as a run's tool makes it, telling no one)
is the truth over older mail claiming another state — no "claims" flag, no doctor error — and a
card's "by" names the role that moved it. A folder git did not move it to is still flagged."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.git import git_project
from workflow.app import App
from workflow.artifacts.move import MoveRequest, move
from workflow.core.config import load_config
from workflow.delivery.transport import make_transport
from workflow.web.pages import board


def test_a_committed_move_is_the_truth_over_older_mail_and_names_its_mover(tmp_path: Path) -> None:
    p = git_project(tmp_path / "b")
    app = App(load_config(p.dir / "workflow.toml", env={}))
    transport = make_transport(app.config, app.deliverer, "direct")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    move(app, MoveRequest("specs/proposed/user-auth.md", "todo", "spec-reviewer", notified_by="approval"), transport)
    p.send("spec-reviewer", "approval", "specs/todo/user-auth.md", "spec-writer", NEXT_STATE="todo")  # claims todo
    move(app, MoveRequest("specs/*/user-auth.md", "doing", "implementer", notified_by="status-update"), transport)
    # moved by hand, not by a role's committed move: the mail's claim disagrees, and that is flagged
    (p.dir / "specs/doing/user-auth.md").rename(p.dir / "specs/done/user-auth.md")
    assert "mail claims todo" in p.run("status").stdout  # (doctor judges git, where the move is the truth)
    (p.dir / "specs/done/user-auth.md").rename(p.dir / "specs/doing/user-auth.md")

    # the implementer's run moves it on, telling no one: git is the truth
    move(app, MoveRequest("specs/*/user-auth.md", "done", "implementer", notified_by="status-update"), transport)
    assert (p.dir / "specs/done/user-auth.md").exists()
    status = p.run("status")
    assert status.returncode == 0, status.stderr
    assert "claims" not in status.stdout, status.stdout
    assert "(moved by implementer, " in status.stdout, status.stdout  # the table names the mover too
    assert "moved to done/ by implementer, " in p.run("status", "specs/done/user-auth.md").stdout
    cards = json.loads(p.run("status", "--json").stdout)["states"]["done"]
    [card] = [c for c in cards if c["path"].endswith("user-auth.md")]
    assert card["flags"] == [] and card["claim"] == "todo" and card["moved_by"] == "implementer", card
    doctor = p.run("doctor")
    assert "claim:" not in doctor.stdout, doctor.stdout
    [view] = [c for c in board(app, "spec-writer").cards if c.path.endswith("user-auth.md")]
    assert view.holder == "implementer" and view.flags == ()
