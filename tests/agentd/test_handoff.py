"""Hand-off: a reviewer role declares once (``hands_off`` in its role file) who its approval goes on
to, and every way of approving uses it: an agent's approval naming no NEXT_ROLES, a person's plain
"Approve" reply, the cockpit's Approve button (a panel's unified decision: tests/panels). An
explicit NEXT_ROLES overrides; an unknown name is refused, naming it. And whoever asked for the
work is told, once, when it reaches done (agentd.told)."""

from __future__ import annotations

import smtplib
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from helpers.agentd import wait_until
from helpers.git import GIT_ENV, git_project, sh
from helpers.project import TESTER, TESTER_PASSWORD, Project
from helpers.smtp import server_process
from workflow.agentd.decide import Decide
from workflow.agentd.tasks import Tasks
from workflow.agentd.told import Told
from workflow.app import App
from workflow.artifacts.move import MoveRequest, move
from workflow.core.config import load_config
from workflow.core.errors import RosterError
from workflow.delivery.transport import make_transport
from workflow.mail.message import parse
from workflow.web.actions import decide

HUMAN = (
    '+++\nmode = "human"\ndescription = "bob reviews specs"\n'
    'hands_off = ["skeleton-writer", "test-writer"]\n+++\n\n# spec-reviewer\n'
)


def _got(p: Project, box: str, event: str) -> list[Any]:
    return [parse(f.read_bytes()) for f in p.new_files(box) if parse(f.read_bytes()).event == event]


def _human(tmp_path: Path) -> Project:
    return _made_human(git_project(tmp_path / "h"))


def _made_human(p: Project) -> Project:
    """The project with spec-reviewer made a person's (bob's) role, committed; its App read again."""
    (p.dir / "roles" / "spec-reviewer.md").write_text(HUMAN)
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "bob reviews specs")
    return Project(p.dir, App(load_config(p.dir / "workflow.toml", env={})))


def test_an_agents_approval_without_next_roles_goes_on_to_its_hand_off(tmp_path: Path) -> None:
    p = git_project(tmp_path / "a")
    assert p.app.roster.hands_off("spec-reviewer") == ("skeleton-writer", "test-writer")
    assert p.app.roster.hands_off("skeleton-reviewer") == ("implementer",)
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer", "--reason", "complete", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    p.send("spec-reviewer", "approval", "specs/todo/user-auth.md", "spec-writer", NEXT_STATE="todo")
    for box in ("spec-writer", "skeleton-writer", "test-writer"):
        [m] = _got(p, box, "approval")
        assert m.next_roles == ["skeleton-writer", "test-writer"], box
    texts = [f.read_text() for f in p.new_files("skeleton-writer") if parse(f.read_bytes()).event == "approval"]
    assert "Next roles: skeleton-writer,test-writer" in texts[0]
    assert _got(p, "implementer", "approval") == []
    # an explicit NEXT_ROLES overrides the hand-off
    p.send("spec-reviewer", "approval", "specs/todo/user-auth.md", "spec-writer", NEXT_ROLES="implementer")
    assert len(_got(p, "implementer", "approval")) == 1 and len(_got(p, "skeleton-writer", "approval")) == 1


def test_an_unknown_hand_off_is_refused_naming_the_file_and_the_name(tmp_path: Path) -> None:
    p = git_project(tmp_path / "u")
    (p.dir / "roles" / "spec-reviewer.md").write_text(HUMAN.replace('"test-writer"', '"test-writr"'))
    app = App(load_config(p.dir / "workflow.toml", env={}))
    with pytest.raises(RosterError) as refused:
        app.roster.hands_off("spec-reviewer")
    assert "spec-reviewer.md" in str(refused.value) and "'test-writr'" in str(refused.value)
    assert "did you mean test-writer" in str(refused.value)
    r = p.run("roster")
    assert r.returncode != 0 and "test-writr" in r.stderr + r.stdout


def test_roster_shows_the_hand_offs(tmp_path: Path) -> None:
    p = git_project(tmp_path / "r")
    r = p.run("roster")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("spec-reviewer"))
    assert "hands off to skeleton-writer, test-writer" in line, r.stdout


def test_a_persons_plain_approve_by_mail_hands_on(tmp_path: Path) -> None:
    p = _human(tmp_path)
    _approves_by_mail(p)
    [told] = _got(p, "spec-writer", "approval")
    for box in ("skeleton-writer", "test-writer"):
        [m2] = _got(p, box, "approval")
        assert m2.message_id == told.message_id and m2.next_roles == ["skeleton-writer", "test-writer"]


def _approves_by_mail(p: Project) -> None:
    """bob's plain "Approve" reply to a review-request, through the server; agentd's decision step
    applies it: the spec moves to todo/."""
    request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "Bob <spec-reviewer@workflow.local>", "spec-writer@workflow.local", "Re: x"
    m["In-Reply-To"] = m["References"] = request
    m["Message-ID"] = f"<{time.time_ns()}.bob@laptop.example>"
    m.set_content("Approve\n")
    before = len(p.new_files("spec-writer"))
    with server_process(p.dir) as (_smtpd, port):
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.login(TESTER, TESTER_PASSWORD)
            s.send_message(m)
        wait_until(lambda: len(p.new_files("spec-writer")) == before + 1, "bob's reply to be stored")
        with p.app.index() as index:
            index.refresh()  # as agentd's scan does before its decisions step
        with Tasks(p.app.config.state.tasks) as tasks:
            said: list[tuple[str, dict[str, Any]]] = []
            step = Decide(p.app, tasks, lambda what, **f: said.append((what, f)))
            n = step.step(lambda: make_transport(p.app.config, p.app.deliverer))
            assert n == 1, (said, tasks.mark("decisions"))
    assert [w for w, _ in said] == ["decided"], said
    assert (p.dir / "specs/todo/user-auth.md").exists()


def test_after_a_reindex_a_persons_decision_still_counts(tmp_path: Path) -> None:
    """agentd kept, for a role made a person's after it first ran, the index row it had reached
    then: mail before it was the agent's, never a decision. `workflow reindex` numbers the rows
    again from 1, so bob's approval after it looked older than the change and was passed over."""
    p = git_project(tmp_path / "x")
    for i in range(12):
        p.send("spec-writer", "question", "specs/proposed/user-auth.md", "implementer", QUESTION=f"q{i}")
    with p.app.index() as index:
        index.refresh()
    with Tasks(p.app.config.state.tasks) as tasks:  # agentd runs, with the project's people (user)
        Decide(p.app, tasks, lambda what, **f: None).step(lambda: make_transport(p.app.config, p.app.deliverer))
    # the agent spec-reviewer approved another spec by mail, before the role was bob's
    (p.dir / "specs/proposed/billing.md").write_text("# Billing\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "spec-writer: propose billing")
    p.send("spec-reviewer", "approval", "specs/proposed/billing.md", "spec-writer", NEXT_STATE="proposed")
    for f in p.new_files("implementer")[:10]:  # mail deleted (expunged over IMAP): rows outnumber copies
        f.unlink()
    with p.app.index() as index:
        index.refresh()
    h = _made_human(p)  # bob's role becomes a person's; agentd, restarted, sees it so
    with Tasks(h.app.config.state.tasks) as tasks:
        Decide(h.app, tasks, lambda what, **f: None).step(lambda: make_transport(h.app.config, h.app.deliverer))
    with h.app.index() as index:
        index.rebuild()  # `workflow reindex`: the rows numbered again from 1
    _approves_by_mail(h)  # bob's approval counts, the agent's old one never did
    assert not (h.dir / "specs/todo/billing.md").exists() and (h.dir / "specs/proposed/billing.md").exists()


def test_the_cockpits_approve_button_hands_on(tmp_path: Path) -> None:
    p = _human(tmp_path)
    request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    done = decide(p.app, "spec-reviewer", request, "approve", "complete")
    assert done.ok, done
    assert (p.dir / "specs/todo/user-auth.md").exists()
    [told] = _got(p, "spec-writer", "approval")
    for box in ("skeleton-writer", "test-writer"):
        [m] = _got(p, box, "approval")
        assert m.message_id == told.message_id


def test_a_copy_of_a_built_in_role_that_says_nothing_of_hand_off_keeps_the_built_ins(tmp_path: Path) -> None:
    p = git_project(tmp_path / "c")
    (p.dir / "roles" / "spec-reviewer.md").write_text('+++\nmode = "human"\n+++\n# spec-reviewer\n')
    (p.dir / "roles" / "test-reviewer.md").write_text('+++\nmode = "human"\nhands_off = []\n+++\n# test-reviewer\n')
    app = App(load_config(p.dir / "workflow.toml", env={}))
    assert app.roster.hands_off("spec-reviewer") == ("skeleton-writer", "test-writer")
    assert app.roster.hands_off("test-reviewer") == ()  # said: nobody


def test_whoever_asked_is_told_once_when_it_reaches_done(tmp_path: Path) -> None:
    p = git_project(tmp_path / "d")
    app = p.app
    transport = make_transport(app.config, app.deliverer, "direct")
    said: list[tuple[str, dict[str, Any]]] = []
    with Tasks(app.config.state.tasks) as tasks:
        told = Told(app, tasks, lambda what, **f: said.append((what, f)))
        assert told.step(lambda: transport, int(time.time())) == 0  # first look: from now on
        ask = p.send("user", "question", "specs/proposed/user-auth.md", "spec-writer", QUESTION="auth, please")
        steps = (("todo", "spec-reviewer"), ("doing", "implementer"), ("done", "implementer"))
        for state, role in steps:  # moves made in runs: nobody is mailed about them
            move(app, MoveRequest("specs/*/user-auth.md", state, role, notified_by="status-update"), transport)
        assert told.step(lambda: transport, int(time.time())) == 1
        assert told.step(lambda: transport, int(time.time())) == 0  # once
        again = Told(app, tasks, lambda what, **f: None)  # agentd started again: the store remembers
        assert again.step(lambda: transport, int(time.time())) == 0
    [note] = _got(p, "user", "status-update")
    assert note.sender == "implementer@workflow.local" and note.state == "done" and ask not in note.references
    assert [w for w, _ in said] == ["told"], said


def test_a_requester_told_by_the_run_itself_is_not_told_again(tmp_path: Path) -> None:
    p = git_project(tmp_path / "e")
    app = p.app
    transport = make_transport(app.config, app.deliverer, "direct")
    with Tasks(app.config.state.tasks) as tasks:
        told = Told(app, tasks, lambda what, **f: None)
        told.step(lambda: transport, int(time.time()))
        p.send("user", "question", "specs/proposed/user-auth.md", "spec-writer", QUESTION="auth, please")
        for state, role in (("todo", "spec-reviewer"), ("doing", "implementer"), ("done", "implementer")):
            move(app, MoveRequest("specs/*/user-auth.md", state, role, notified_by="status-update"), transport)
        p.send("implementer", "status-update", "specs/done/user-auth.md", "user", CONTEXT="built")
        assert told.step(lambda: transport, int(time.time())) == 0
    assert len(_got(p, "user", "status-update")) == 1


def test_a_persons_typed_approval_from_a_client_is_handed_on_to_whom_it_did_not_reach(tmp_path: Path) -> None:
    p = _human(tmp_path)
    request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    m = EmailMessage()  # as mutt sends it with its X-Event-Type header: to the writer, Cc test-writer
    m["From"], m["To"], m["Cc"] = (
        "spec-reviewer@workflow.local",
        "spec-writer@workflow.local",
        "test-writer@workflow.local",
    )
    m["Subject"], m["In-Reply-To"] = "Re: user-auth", request
    m["X-Event-Type"], m["X-Artifacts"] = "approval", "specs/proposed/user-auth.md"
    m.set_content("Fine by me.\n")
    with server_process(p.dir) as (_smtpd, port):
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.login(TESTER, TESTER_PASSWORD)
            s.send_message(m)
        wait_until(lambda: len(p.new_files("spec-writer")) == 1, "bob's approval to be stored")
        with p.app.index() as index:
            index.refresh()
        with Tasks(p.app.config.state.tasks) as tasks:
            step = Decide(p.app, tasks, lambda what, **f: None)
            assert step.step(lambda: make_transport(p.app.config, p.app.deliverer)) == 1
    assert (p.dir / "specs/todo/user-auth.md").exists()
    assert len(_got(p, "test-writer", "approval")) == 1  # his own Cc: not a second copy
    [handed] = _got(p, "skeleton-writer", "approval")
    assert handed.sender == "spec-reviewer@workflow.local" and handed.next_roles == ["skeleton-writer"]
    assert _got(p, "spec-writer", "approval")[0].message_id != handed.message_id
