"""workflow web in a real browser (headless Chromium): a person decides with one click and another
session sees the card move live; a blocker is answered and a paused role resumed from the page;
hostile names and subjects stay text. The board's screenshot in docs/cockpit.md (docs/images/web-board.png) is made here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from helpers.browser import chrome, gone, log_in, open_link, steady, wait_for
from helpers.git import GIT_ENV, sh
from helpers.project import Project, free_port
from helpers.web import BOB, BOB_PASSWORD, Server, owner_link, web_server
from workflow.agentd.tasks import Tasks
from workflow.mail.message import parse

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "images" / "web-board.png"


def _by_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def _card(state: str, path: str) -> str:
    return f'section[data-state="{state}"] article[data-path="{path}"]'


def _mail(p: Project, box: str, event: str) -> list[tuple[str | None, str | None]]:
    out = []
    for f in p.new_files(box):
        m = parse(f.read_bytes())
        if m.event == event:
            out.append(((m.sender or "").split("@")[0], m.in_reply_to))
    return out


def test_bob_approves_in_the_browser_and_a_watching_board_moves_the_card(project: Project, server: Server) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    project.send("implementer", "status-update", "specs/proposed/billing.md", "spec-writer", CONTEXT="drafting")
    for path in ("doing/search.md", "blocked/cache.md", "done/login.md"):  # a fuller board for the screenshot
        (project.dir / "specs" / path).write_text("# x\n")
    project.send(
        "implementer", "blocker-report", "specs/blocked/cache.md", "platform-lead", BLOCKING_DETAILS="no Redis"
    )
    project.send("implementer", "question", "specs/doing/search.md", "spec-writer", QUESTION="fuzzy or exact?")
    commits = int(sh(project, "git", "rev-list", "--count", "HEAD").stdout)
    with chrome(height=560) as watcher, chrome() as bob:
        open_link(watcher, owner_link(project))
        wait_for(watcher, lambda d: _by_css(d, _card("proposed", "specs/proposed/user-auth.md")), "the card")
        wait_for(watcher, lambda d: "on" in d.find_element("id", "live").get_attribute("class"), "the live stream")
        watcher.execute_script("window.sameDocument = 'yes'")  # a reload would lose it

        log_in(bob, server.url, BOB, BOB_PASSWORD)
        bob.get(server.url + "inbox")
        assert "[REVIEW REQUEST] user-auth" in bob.page_source
        bob.get(server.url + "board")
        wait_for(bob, lambda d: _by_css(d, _card("proposed", "specs/proposed/user-auth.md")), "bob's card")

        def approve() -> None:
            card = _by_css(bob, _card("proposed", "specs/proposed/user-auth.md"))[0]
            card.find_element("css selector", "textarea").send_keys("Complete; ship it.")
            card.find_element("css selector", "button.approve").click()

        steady(approve)
        flash = wait_for(bob, lambda d: _by_css(d, "#flash"), "the outcome")[0].text
        assert "approval sent to spec-writer" in flash, flash

        assert (project.dir / "specs/todo/user-auth.md").exists()
        assert int(sh(project, "git", "rev-list", "--count", "HEAD").stdout) == commits + 1
        head = sh(project, "git", "log", "-1", "--format=%an%n%B").stdout
        assert head.startswith("spec-reviewer\n") and "Complete; ship it." in head, head
        assert _mail(project, "spec-writer", "approval") == [("spec-reviewer", request)]

        wait_for(watcher, lambda d: _by_css(d, _card("todo", "specs/todo/user-auth.md")), "the card to move", 5)
        assert not _by_css(watcher, _card("proposed", "specs/proposed/user-auth.md"))
        assert watcher.execute_script("return window.sameDocument") == "yes"  # live, not reloaded

        png = watcher.get_screenshot_as_png()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
        if os.environ.get("WORKFLOW_UPDATE_SCREENSHOT"):
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            SCREENSHOT.write_bytes(png)


def test_a_blocker_is_answered_and_a_paused_role_resumed_from_the_page(project: Project, server: Server) -> None:
    (project.dir / "specs" / "blocked" / "cache.md").write_text("# cache\n")
    sh(project, "git", "add", "-A")
    sh(project, "git", "commit", "-q", "-m", "cache is blocked")
    blocker = project.send(
        "implementer", "blocker-report", "specs/blocked/cache.md", "platform-lead", BLOCKING_DETAILS="no Redis"
    )
    with Tasks(project.app.config.state.tasks) as tasks:
        tasks.pause("implementer", "over its daily token budget: 900 > 500")
    with chrome() as owner:
        open_link(owner, owner_link(project))
        wait_for(owner, lambda d: _by_css(d, _card("blocked", "specs/blocked/cache.md") + " .waiting"), "the blocker")
        from selenium.webdriver.support.ui import Select

        Select(owner.find_element("id", "role")).select_by_value("platform-lead")
        before = owner.find_element("tag name", "html")
        owner.find_element("css selector", "form[action='/role'] button").click()
        # the page the switch answered with (the select on the old page says platform-lead already)
        wait_for(
            owner,
            lambda d: gone(before) and d.find_element("id", "role").get_attribute("value") == "platform-lead",
            "the role",
        )
        owner.get(server.url + "inbox")
        wait_for(owner, lambda d: _by_css(d, "section.thread h3 a"), "platform-lead's inbox")
        steady(lambda: owner.find_element("css selector", "section.thread h3 a").click())
        wait_for(owner, lambda d: _by_css(d, "form.answer"), "the answer form")

        def unblock() -> None:
            form = owner.find_element("css selector", "form.answer")
            form.find_element("css selector", "textarea").send_keys("Use the in-process cache for now.")
            form.find_element("css selector", "input[name=unblock]").click()  # a move platform-lead may not make
            form.find_element("css selector", "button").click()

        steady(unblock)
        flash = wait_for(owner, lambda d: _by_css(d, "#flash"), "the outcome")[0].text
        assert flash.startswith("answer sent to implementer; nothing moved: platform-lead may not move"), flash
        assert _mail(project, "implementer", "answer") == [("platform-lead", blocker)]
        assert (project.dir / "specs/blocked/cache.md").exists()

        owner.get(server.url + "runs")
        paused = 'tr[data-role="implementer"]'
        wait_for(owner, lambda d: _by_css(d, paused), "the paused role")
        assert "over its daily token budget" in steady(lambda: owner.find_element("css selector", paused).text)
        steady(lambda: owner.find_element("css selector", paused + " button.resume").click())
        flash = wait_for(owner, lambda d: _by_css(d, "#flash"), "the outcome")[0].text
        assert "implementer: resumed" in flash, flash
    r = subprocess.run(
        [sys.executable, "-m", "workflow", "agentd", "status", "--json"],
        cwd=project.dir,
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, **GIT_ENV},
        timeout=60,
    )
    assert json.loads(r.stdout)["paused"] == {}, r.stdout + r.stderr


def test_html_in_a_subject_or_an_artifact_name_stays_text(project: Project, server: Server) -> None:
    hostile = '<img src=x onerror="window.pwned=1">.md'
    (project.dir / "specs" / "proposed" / hostile).write_text("# x\n")
    m = EmailMessage()
    m["From"] = "spec-writer@workflow.local"
    m["To"] = "spec-reviewer@workflow.local"
    m["Subject"] = "<script>window.pwned=2</script> please look"
    m["X-Event-Type"] = "question"
    m["X-Artifacts"] = "specs/proposed/user-auth.md"
    m["Message-ID"] = "<hostile.1@workflow.local>"
    m.set_content("<script>window.pwned=3</script>\n<b>bold?</b>\n")
    project.app.deliverer.deliver(m.as_bytes(), ["spec-reviewer@workflow.local"])  # as the server delivers it
    h = EmailMessage()  # HTML mail from a mail client, with an attachment
    h["From"] = "spec-writer@workflow.local"
    h["To"] = "spec-reviewer@workflow.local"
    h["Subject"] = "the HTML one"
    h["Message-ID"] = "<hostile.2@workflow.local>"
    h["In-Reply-To"] = "<hostile.1@workflow.local>"
    h.set_content("<p>Limits: <i>100/s</i></p><script>window.pwned=4</script>", subtype="html")
    h.add_attachment(
        b"line one\n<script>window.pwned=5</script>\n",
        "text",
        "plain",
        filename='<img src=x onerror="window.pwned=6">.txt',
    )
    project.app.deliverer.deliver(h.as_bytes(), ["spec-reviewer@workflow.local"])
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        assert hostile.removesuffix(".md") in bob.find_element("css selector", "main").text
        bob.get(server.url + "inbox")
        assert "<script>window.pwned=2</script> please look" in bob.find_element("css selector", "main").text
        steady(lambda: bob.find_element("css selector", "section.thread h3 a").click())  # the inbox may refresh
        wait_for(bob, lambda d: "<b>bold?</b>" in d.find_element("css selector", "main").text, "the message text")
        text = bob.find_element("css selector", "main").text
        assert "Limits: 100/s" in text and "window.pwned=4" not in text  # HTML mail read as its text
        assert bob.execute_script("return window.pwned === undefined") is True
        assert not _by_css(bob, "main img, main script, main b, main i")
        part = bob.find_element("css selector", "ul.parts a")
        assert part.text.startswith('[1] <img src=x onerror="window.pwned=6">.txt (text/plain')
        part.click()
        wait_for(bob, lambda d: "line one" in d.page_source, "the attachment as text")
        assert "<script>window.pwned=5</script>" in bob.find_element("css selector", "body").text
        assert bob.execute_script("return window.pwned === undefined") is True


def test_an_open_page_catches_up_after_the_server_restarts(project: Project) -> None:
    """The session outlives the server (its key is in the state directory), and the page's stream
    reconnects by itself and brings what arrived while the server was down — no reload."""
    port = free_port()
    card = _card("proposed", "specs/proposed/billing.md")
    with chrome() as bob:
        with web_server(project, "--port", str(port)) as first:
            log_in(bob, first.url, BOB, BOB_PASSWORD)
            wait_for(bob, lambda d: _by_css(d, card), "billing's card")
            assert not _by_css(bob, card + " button.approve")
            bob.execute_script("window.sameDocument = 'yes'")
        project.send("spec-writer", "review-request", "specs/proposed/billing.md", "spec-reviewer")
        with web_server(project, "--port", str(port)):
            wait_for(bob, lambda d: _by_css(d, card + " button.approve"), "the review-request on the open page")
        assert bob.execute_script("return window.sameDocument") == "yes"
