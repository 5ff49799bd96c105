"""A person acts as their role in the cockpit, through the same rules as the CLI: bob drags a card
(real Chromium, the drag's DragEvents dispatched with a DataTransfer — Selenium's drag does not
fire HTML5 drag and drop) to an illegal state and is refused with the rule's text, nothing moved;
to a legal one, and one commit as spec-reviewer moves it. The no-script "move to" form does the
same; a new request (written here, or picked) reaches the chosen role; a reply lands in the thread."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from helpers.browser import chrome, log_in, steady, wait_for
from helpers.git import GIT_ENV, sh
from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Client, Server
from workflow.mail.message import parse

CARD = 'section[data-state="{}"] article[data-path="{}"]'

DRAG = """
const [path, state] = arguments;
const card = document.querySelector(`article.card[data-path="${path}"]`);
const column = document.querySelector(`section.column[data-state="${state}"]`);
const dt = new DataTransfer();
const at = (el, type) => el.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: dt}));
at(card, "dragstart");
at(column, "dragenter");
const allowed = !at(column, "dragover");  // a drop target cancels dragover
at(column, "drop");
at(card, "dragend");
return allowed;
"""


def _css(driver: Any, css: str) -> list[Any]:
    return list(driver.find_elements("css selector", css))


def _head(p: Project) -> str:
    return sh(p, "git", "rev-parse", "HEAD").stdout.strip()


def _mail(p: Project, box: str, event: str) -> list[Any]:
    return [m for m in (parse(f.read_bytes()) for f in p.new_files(box)) if m.event == event]


def _drag(driver: Any, path: str, state: str) -> str:
    """Drag the card of ``path`` onto ``state``'s column; the flash the page then shows."""
    driver.execute_script("window.before = 'drag'")
    assert driver.execute_script(DRAG, path, state) is True
    wait_for(driver, lambda d: d.execute_script("return window.before") is None, "the form posted (a new page)")
    return str(wait_for(driver, lambda d: _css(d, "#flash"), "the outcome")[0].text)


def test_bob_drags_a_card_refused_by_the_graph_then_moved_in_one_commit(project: Project, server: Server) -> None:
    start = _head(project)
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        card = wait_for(bob, lambda d: _css(d, CARD.format("proposed", "specs/proposed/billing.md")), "the card")[0]
        assert card.get_attribute("draggable") == "true"  # drag.js made it draggable

        flash = _drag(bob, "specs/proposed/billing.md", "done")
        assert flash.startswith("Refused by rule [artifacts] transitions: illegal transition proposed → done"), flash
        assert "legal from proposed/: proposed → todo" in flash, flash
        assert _css(bob, CARD.format("proposed", "specs/proposed/billing.md"))  # nothing moved, on the page…
        assert not _css(bob, CARD.format("done", "specs/done/billing.md"))
        assert _head(project) == start  # … nor in git
        assert (project.dir / "specs/proposed/billing.md").exists() and not (
            project.dir / "specs/done/billing.md"
        ).exists()

        wait_for(bob, lambda d: "on" in d.find_element("id", "live").get_attribute("class"), "the live stream")
        project.send("spec-writer", "status-update", "specs/proposed/billing.md", "spec-reviewer", CONTEXT="typo")
        wait_for(bob, lambda d: d.execute_script("return document.body.dataset.updated"), "the board's live update")
        fresh = _css(bob, CARD.format("proposed", "specs/proposed/billing.md"))[0]
        assert fresh.get_attribute("draggable") == "true"  # a card the stream put there is draggable too

        flash = _drag(bob, "specs/proposed/billing.md", "todo")
        assert flash.startswith("moved specs/proposed/billing.md → specs/todo/billing.md"), flash
        wait_for(bob, lambda d: _css(d, CARD.format("todo", "specs/todo/billing.md")), "the card in todo/")
        assert not _css(bob, CARD.format("proposed", "specs/proposed/billing.md"))

    commits = sh(project, "git", "log", "--format=%H %an <%ae>|%s", f"{start}..HEAD").stdout.splitlines()
    assert len(commits) == 1, commits
    assert " spec-reviewer <" in commits[0] and commits[0].endswith("|spec-reviewer: approve billing (proposed → todo)")
    changed = sh(project, "git", "show", "--name-status", "--format=", "HEAD").stdout.split()
    assert sorted(changed) == ["R100", "specs/proposed/billing.md", "specs/todo/billing.md"], changed
    assert sh(project, "git", "status", "--porcelain", "specs").stdout == ""


def test_the_move_to_form_moves_without_script_and_needs_the_sessions_token(project: Project, server: Server) -> None:
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, board = bob.get("/board")
    assert 'action="/act/move"' in board and '<option value="todo">todo/</option>' in board
    start = _head(project)
    form = {"path": "specs/proposed/billing.md", "state": "todo", "back": "/board"}
    assert bob.post("/act/move", {**form, "csrf": "0" * 64})[0] == 403
    assert bob.post("/act/move", {**form, "csrf": bob.csrf()}, origin="http://evil.example")[0] == 403
    assert _head(project) == start and (project.dir / "specs/proposed/billing.md").exists()

    assert bob.post("/act/move", {**form, "csrf": bob.csrf(), "tell": "spec-writer", "reason": "ready"})[0] == 303
    assert (project.dir / "specs/todo/billing.md").exists()
    assert (
        sh(project, "git", "log", "-1", "--format=%an", "--", "specs/todo/billing.md").stdout.strip() == "spec-reviewer"
    )
    told = _mail(project, "spec-writer", "approval")  # --notify spec-writer, as the CLI's: an approval
    assert [(m.sender or "").split("@")[0] for m in told] == ["spec-reviewer"], told
    assert "specs/todo/billing.md" in told[0].artifacts


def test_a_new_request_writes_the_artifact_as_bobs_role_and_reaches_the_chosen_role(
    project: Project, server: Server
) -> None:
    start = _head(project)
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        bob.get(server.url + "new")
        from selenium.webdriver.support.ui import Select

        def fill() -> None:
            Select(bob.find_element("id", "event")).select_by_value("review-request")
            Select(bob.find_element("id", "to")).select_by_value("spec-writer")
            bob.find_element("id", "name").send_keys("search")
            bob.find_element("id", "text").send_keys("# search\n\nFind a word in the mail you may read.")
            bob.find_element("id", "note").send_keys("a first draft")
            bob.find_element("id", "send").click()

        steady(fill)
        flash = wait_for(bob, lambda d: _css(d, "#flash"), "the outcome")[0].text
        assert "review-request about specs/proposed/search.md sent to spec-writer" in flash, flash

    assert (project.dir / "specs/proposed/search.md").read_text().startswith("# search\n\nFind a word")
    log = sh(project, "git", "log", "--format=%an|%s", f"{start}..HEAD").stdout.splitlines()
    assert log == ["spec-reviewer|spec-reviewer: propose search.md"], log
    assert "Workflow-Notify: none (a person's new artifact" in sh(project, "git", "log", "-1", "--format=%B").stdout
    assert sh(project, "git", "status", "--porcelain", "specs").stdout == ""
    got = _mail(project, "spec-writer", "review-request")
    assert len(got) == 1 and got[0].artifacts == ["specs/proposed/search.md"], got
    assert (got[0].sender or "").startswith("spec-reviewer@")


def test_a_question_about_a_picked_artifact_and_a_refused_one_say_why(project: Project, server: Server) -> None:
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, page = bob.get("/new")
    assert status == 200 and '<option value="specs/proposed/billing.md">' in page
    fields = {"event": "question", "to": "implementer", "path": "specs/proposed/billing.md", "back": "/new"}
    assert bob.post("/act/request", {**fields, "note": "which currency?", "csrf": bob.csrf("/new")})[0] == 303
    asked = _mail(project, "implementer", "question")
    assert len(asked) == 1 and asked[0].artifacts == ["specs/proposed/billing.md"]
    assert any(b"Question: which currency?" in f.read_bytes() for f in project.new_files("implementer"))

    start = _head(project)
    taken = {**fields, "event": "review-request", "name": "billing", "text": "# again", "csrf": bob.csrf("/new")}
    bob.post("/act/request", taken)
    status, page = bob.get("/new")
    assert "billing exists already as specs/proposed/billing.md" in page, page[-2000:]
    assert _head(project) == start
    twice = {**taken, "name": "refunds.md.md", "text": "# refunds", "csrf": bob.csrf("/new")}
    bob.post("/act/request", twice)  # a hostile round made specs/proposed/refunds.md.md this way
    assert "give the name once, without .md" in bob.get("/new")[1]
    assert _head(project) == start and not list((project.dir / "specs" / "proposed").glob("refunds*"))


def test_a_reply_lands_in_the_thread_in_reply_to_the_message(project: Project, server: Server) -> None:
    update = project.send(
        "spec-writer", "status-update", "specs/proposed/billing.md", "spec-reviewer", CONTEXT="drafted"
    )
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        bob.get(server.url + "thread?id=" + quote(update, safe=""))

        def reply() -> None:
            box = bob.find_element("css selector", "form.reply textarea")
            box.send_keys("Does it cover refunds?")
            bob.find_element("css selector", "button.reply").click()

        steady(reply)
        flash = wait_for(bob, lambda d: _css(d, "#flash"), "the outcome")[0].text
        assert flash.startswith("question sent to spec-writer in the thread"), flash
        wait_for(bob, lambda d: "Does it cover refunds?" in d.page_source, "the reply shown in the thread")

    got = _mail(project, "spec-writer", "question")
    assert len(got) == 1, got
    assert got[0].in_reply_to == update and (got[0].sender or "").startswith("spec-reviewer@")
    assert got[0].artifacts == ["specs/proposed/billing.md"]


def test_a_reply_to_a_question_is_its_answer(project: Project, server: Server) -> None:
    asked = project.send("implementer", "question", "specs/proposed/billing.md", "spec-reviewer", QUESTION="euros?")
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    page = "/thread?id=" + quote(asked, safe="")
    status, html = bob.get(page)
    assert status == 200 and 'action="/act/reply"' in html
    form = {"id": asked, "text": "Euros, and pounds later.", "back": page, "csrf": bob.csrf(page)}
    assert bob.post("/act/reply", form)[0] == 303
    got = _mail(project, "implementer", "answer")
    assert len(got) == 1 and got[0].in_reply_to == asked, got
    assert bob.post("/act/reply", {**form, "id": "<nobody@else>", "csrf": bob.csrf(page)})[0] == 303
    assert "&lt;nobody@else&gt; is not in spec-reviewer&#39;s mail" in bob.get(page)[1]


def test_a_reply_in_the_thread_of_a_moved_artifact_claims_where_it_is_now(project: Project, server: Server) -> None:
    """A hostile round: once the card had moved, every reply in its thread was refused (it claimed
    the state the thread's first mail recorded: state-matches)."""
    asked = project.send("implementer", "question", "specs/proposed/billing.md", "spec-reviewer", QUESTION="euros?")
    r = project.run("move", "billing", "todo", "--as", "spec-reviewer", "--reason", "ok", env=GIT_ENV)
    assert r.returncode == 0, r.stderr
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    page = "/thread?id=" + quote(asked, safe="")
    form = {"id": asked, "text": "Euros.", "back": page, "csrf": bob.csrf(page)}
    assert bob.post("/act/reply", form)[0] == 303
    got = _mail(project, "implementer", "answer")
    assert len(got) == 1 and got[0].in_reply_to == asked and got[0].artifacts == ["specs/todo/billing.md"], got
