"""The cockpit's artifact page (/artifact?path=…) in a real browser over real git: bob opens the
artifact of a request from its card, reads its text and the diff against the version reviewed
before, approves with a reason, and its timeline shows request → decision → the move's commit. A
hostile Markdown artifact stays inert; a path naming nothing, or nothing readable, is one 404; the
timeline's mail is only what the viewer may read."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from helpers.browser import chrome, log_in, steady, wait_for
from helpers.git import sh
from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Client, Server, add_person

PATH = "specs/proposed/pricing.md"


def _css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def _commit(p: Project, subject: str, role: str) -> str:
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", subject, "-m", f"Workflow-Role: {role}")
    return sh(p, "git", "rev-parse", "HEAD").stdout.strip()


def test_bob_reads_the_diff_since_his_last_review_approves_and_sees_the_timeline(
    project: Project, server: Server
) -> None:
    spec = project.dir / PATH
    spec.write_text("# Pricing\n\nPay yearly.\n")
    first = _commit(project, "spec-writer: propose pricing", "spec-writer")
    project.send("spec-writer", "review-request", PATH, "spec-reviewer")
    spec.write_text("# Pricing\n\nPay **monthly**.\n")
    second = _commit(project, "spec-writer: monthly, as asked", "spec-writer")
    request = project.send("spec-writer", "review-request", PATH, "spec-reviewer")
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        card_link = f'article.card[data-path="{PATH}"] h3 a'
        wait_for(bob, lambda d: _css(d, card_link), "the card's link")
        steady(lambda: bob.find_element("css selector", card_link).click())  # the board may refresh under it
        wait_for(bob, lambda d: _css(d, "#artifact-text h1"), "the artifact page")
        assert "/artifact?path=" in bob.current_url
        assert bob.find_element("css selector", "#artifact-text h1").text == "Pricing"
        assert bob.find_element("css selector", "#artifact-text strong").text == "monthly"
        diff = bob.find_element("css selector", "#artifact-diff").text
        assert "-Pay yearly." in diff and "+Pay **monthly**." in diff, diff  # against the version reviewed before
        assert first[:10] in diff and second[:10] in diff, diff
        rows = [r.get_attribute("data-version") for r in _css(bob, "table.versions tbody tr")]
        assert rows[:2] == [second, first], rows  # newest first, with the working tree no different

        def approve() -> None:
            form = bob.find_element("css selector", "section.asked form.decide")
            form.find_element("css selector", "textarea").send_keys("Monthly is right.")
            form.find_element("css selector", "button.approve").click()

        steady(approve)
        flash = wait_for(bob, lambda d: _css(d, "#flash"), "the outcome")[0].text
        assert "approval sent to spec-writer" in flash, flash
        assert (project.dir / "specs/todo/pricing.md").exists()
        move = sh(project, "git", "log", "-1", "--format=%H%n%B").stdout
        assert "Monthly is right." in move and "Workflow-Role: spec-reviewer" in move, move
        head = move.split("\n", 1)[0]

        # back on the page (found in todo/ now): the timeline, in order, linking to the mail
        def timeline() -> list[tuple[str, str]]:
            return [(li.get_attribute("data-what"), li.text) for li in _css(bob, "#timeline li")]

        got = wait_for(bob, lambda d: (t := timeline()) and "move" in t[-1][0] and t, "the move in the timeline")
        whats = [w for w, _ in got]
        last_request = max(i for i, w in enumerate(whats) if w == "review-request")
        approval = whats.index("approval")
        moved = next(i for i, w in enumerate(whats) if w.startswith("move "))
        assert last_request < approval < moved, got
        assert whats[moved] == f"move {PATH} -> specs/todo/pricing.md", got
        assert head[:10] in got[moved][1] and "by spec-reviewer" in got[moved][1], got
        assert f"on version {second[:10]}" in got[approval][1], got  # the decision names what it decided on
        assert f"on version {second[:10]}" in got[last_request][1], got
        assert whats[:2] == ["commit", "review-request"] and f"on version {first[:10]}" in got[1][1], got
        links = [a.get_attribute("href") for a in _css(bob, "#timeline li a")]
        assert any(quote(request, safe="") in (h or "") for h in links), links
        assert not _css(bob, "section.asked"), "decided: no buttons"
        assert bob.find_element("css selector", ".artifact-page h2").text.endswith("in todo/")


HOSTILE = """# Evil

<script>window.pwned = 1; alert(1)</script>
<svg onload="window.pwned = 2; alert(2)"><circle r="5"/></svg>
<img src=x onerror="window.pwned = 3">
<div style="color:red" onclick="alert(4)">raw html</div>

[click](javascript:window.pwned=4) [also](  JaVaScRiPt:alert(5)) [tab](java\tscript:alert(6))
[ok](https://example.org/)

<a href="javascript:alert(7)">raw link</a>
"""


def test_a_hostile_artifact_stays_inert_in_the_browser(project: Project, server: Server) -> None:
    (project.dir / "specs/proposed/evil.md").write_text(HOSTILE)
    _commit(project, "spec-writer: evil", "spec-writer")
    with chrome() as bob:
        log_in(bob, server.url, BOB, BOB_PASSWORD)
        bob.get(server.url + "artifact?path=" + quote("specs/proposed/evil.md", safe=""))
        wait_for(bob, lambda d: _css(d, "#artifact-text h1"), "the artifact page")
        from selenium.common.exceptions import NoAlertPresentException

        try:
            text = bob.switch_to.alert.text
            raise AssertionError(f"an alert opened: {text}")
        except NoAlertPresentException:
            pass
        assert bob.execute_script("return window.pwned === undefined") is True
        body = bob.find_element("css selector", "#artifact-text")
        assert not body.find_elements("css selector", "script, svg, img, div, [onload], [onclick], [onerror]")
        assert bob.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
        hrefs = [a.get_attribute("href") or "" for a in bob.find_elements("css selector", "a")]
        assert hrefs and not [h for h in hrefs if "script:" in h.lower().replace("\t", "")], hrefs
        assert "https://example.org/" in hrefs
        assert "<script>window.pwned" in body.text and "<svg onload" in body.text  # shown as text


def test_nothing_readable_is_one_404_and_the_timeline_keeps_to_the_viewers_mail(
    project: Project, server: Server
) -> None:
    spec = project.dir / PATH
    spec.write_text("# Pricing\n")
    (project.dir / "specs/proposed/.hidden.md").write_text("secret\n")
    (project.dir / "specs/proposed/link.md").symlink_to(project.dir / "workflow.toml")
    _commit(project, "spec-writer: pricing", "spec-writer")
    project.send("implementer", "question", PATH, "platform-lead", QUESTION="the rate is CONFIDENTIAL-42?")
    project.send("spec-writer", "review-request", PATH, "spec-reviewer")
    add_person(project, "carol", "carol-password", "platform-lead")
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    answers = set()
    for path in (
        "specs/proposed/nothing.md",
        "specs/proposed/.hidden.md",
        "specs/proposed/link.md",
        "../workflow.toml",
    ):
        status, page = bob.get("/artifact?path=" + quote(path, safe=""))
        assert status == 404, (path, status)
        answers.add(page.split('<main id="main"', 1)[1].split(">", 1)[1].split("</main>")[0])
    assert answers == {"<p>Not found.</p>"}, answers
    status, page = bob.get("/artifact?path=" + quote("specs/*/pricing.md", safe=""))  # a glob, as cards name it
    assert status == 200 and 'data-what="review-request"' in page
    assert 'data-what="question"' not in page and "CONFIDENTIAL" not in page  # platform-lead's mail
    carol = Client(server.url)
    assert carol.login("carol", "carol-password") == 303
    status, page = carol.get("/artifact?path=" + quote(PATH, safe=""))
    assert status == 200 and 'data-what="question"' in page and 'data-what="review-request"' not in page
    assert "<h1>Pricing</h1>" in page  # the text is everyone's
    assert 'class="decide"' not in page  # carol is not asked
    status, _ = Client(server.url).get("/artifact?path=" + quote(PATH, safe=""))
    assert status in (303, 200)  # not logged in: sent to the login page, nothing of the artifact
