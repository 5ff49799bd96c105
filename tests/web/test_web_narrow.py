"""Find and narrow, through a real `workflow web` and in Chromium: the header's search box finds a
word in mail bob may read and not in a panel's internal mail (which a member finds), and an
artifact by its text; at 1,000 artifacts the board's filters (state, role, waiting on me, event,
age) pick the right cards, in natural order (feat-5 before feat-10), with identical lines
collapsed into a count and each column folded over a few cards, one link from the rest; at
390×844 no element of the board, an inbox, a thread, a search, an artifact, a new request or the
charts lies outside the viewport."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote, urlencode

from helpers.browser import chrome, log_in, open_link, steady, wait_for
from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Client, Server, owner_link
from workflow.web.narrow import FOLD, PAGE, natural

N = 1000
STATES = ("proposed", "todo", "doing", "blocked", "done")


def _many(p: Project) -> None:
    """``N`` artifacts feat-0 … feat-999 spread over the state folders (feat-K in STATES[K % 5])."""
    for k in range(N):
        (p.dir / "specs" / STATES[k % 5] / f"feat-{k}.md").write_text(f"# feat-{k}\n\nA feature, number {k}.\n")


def _columns(page: str) -> dict[str, list[str]]:
    """The card paths of each column of a board page, in the page's order."""
    out: dict[str, list[str]] = {}
    for m in re.finditer(r'<section class="column" data-state="([^"]+)">(.*?)</section>', page, re.S):
        out[m.group(1)] = [
            html.unescape(p) for p in re.findall(r'<article class="card" data-path="([^"]+)"', m.group(2))
        ]
    return out


def _feats(paths: list[str]) -> list[int]:
    return [int(m.group(1)) for p in paths if (m := re.search(r"feat-(\d+)\.md$", p))]


def test_search_finds_what_bob_may_read_and_not_a_panels_internal_mail(project: Project, server: Server) -> None:
    mine = project.send(
        "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="quokka-for-bob"
    )
    project.send(
        "spec-writer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-writer-panel-internal",
        QUESTION="okapi-quokka-inside-the-panel",
    )
    (project.dir / "specs" / "todo" / "ledger.md").write_text("# Ledger\n\nThe pangolin schema keeps every entry.\n")

    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, page = bob.get("/search?" + urlencode({"q": "quokka"}))
    assert status == 200 and quote(mine, safe="") in page and "[REVIEW REQUEST] user-auth" in page
    assert "okapi" not in page and "1 message spec-reviewer may read" in page
    status, page = bob.get("/search?" + urlencode({"q": "okapi"}))
    assert status == 200 and "Nothing found." in page and "okapi-quokka" not in page
    # the word is there to be found: a member of the panel finds it
    member = Client(server.url)
    assert member.follow(owner_link(project)) == 303
    csrf = member.csrf()
    assert member.post("/role", {"role": "spec-writer-panel.claude", "csrf": csrf, "back": "/board"})[0] == 303
    status, page = member.get("/search?" + urlencode({"q": "okapi"}))
    assert status == 200 and "[QUESTION]" in page and "1 message spec-writer-panel.claude may read" in page

    # an artifact by its text and by its name, with the line the word is on; not by a word it lacks
    status, page = bob.get("/search?" + urlencode({"q": "pangolin schema"}))
    assert 'data-path="specs/todo/ledger.md"' in page and "The pangolin schema keeps every entry." in page
    assert 'data-path="specs/todo/ledger.md"' in bob.get("/search?q=ledger")[1]
    assert 'data-path="specs/todo/ledger.md"' not in bob.get("/search?" + urlencode({"q": "pangolin zebra"}))[1]

    # in Chromium, from the header's search box on the board
    with chrome() as driver:
        log_in(driver, server.url, BOB, BOB_PASSWORD)
        box = driver.find_element("css selector", "header form.find input[name=q]")
        box.send_keys("quokka\n")
        wait_for(driver, lambda d: "/search?q=quokka" in d.current_url, "the search page")
        found = driver.find_elements("css selector", "ul.found.mail a")
        assert [a.text for a in found] == ["[REVIEW REQUEST] user-auth ready for review"], [a.text for a in found]
        assert "okapi" not in driver.page_source


def test_filters_natural_order_and_folding_at_a_thousand_artifacts(project: Project, server: Server) -> None:
    _many(project)
    for i in range(4):  # four questions from the user to bob about feat-7: one line, ×4
        project.send("user", "question", "specs/doing/feat-7.md", "spec-reviewer", QUESTION=f"which one {i}?")
    request = project.send("spec-writer", "review-request", "specs/proposed/feat-10.md", "spec-reviewer")
    project.send("implementer", "status-update", "specs/blocked/feat-13.md", "spec-writer", CONTEXT="stuck")
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303

    # the whole board: every column folded over FOLD cards, in natural order, the rest one link away
    status, page = bob.get("/board")
    assert status == 200
    cols = _columns(page)
    assert list(cols) == list(STATES)
    assert cols["proposed"][0] == "specs/proposed/billing.md"  # billing, feat-0, feat-5, feat-10 … user-auth
    assert _feats(cols["proposed"]) == [5 * k for k in range(FOLD - 1)]
    for i, state in enumerate(STATES[1:], 1):
        assert _feats(cols[state]) == [5 * k + i for k in range(FOLD)], state
    assert 'href="/board?state=proposed" class="more">+ 177 more</a>' in page  # 202 cards in proposed/
    assert 'href="/board?state=doing" class="more">+ 175 more</a>' in page
    assert page.count('<article class="card"') == 5 * FOLD
    assert len(page) < 200_000, len(page)
    assert re.search(r'waits: <a href="/thread\?id=[^"]+">question from user</a> <span class="times">×4</span>', page)
    assert page.count("question from user") == 1

    # one state, in pages of PAGE
    status, page = bob.get("/board?state=proposed")
    cols = _columns(page)
    assert list(cols) == ["proposed"] and len(cols["proposed"]) == PAGE
    assert _feats(cols["proposed"]) == [5 * k for k in range(PAGE - 1)]
    assert 'href="/board?state=proposed&amp;page=2" class="more">+ 2 more</a>' in page
    page = bob.get("/board?state=proposed&page=2")[1]
    assert _columns(page)["proposed"] == ["specs/proposed/feat-995.md", "specs/proposed/user-auth.md"]
    assert 'href="/board?state=proposed" class="previous">' in page
    every = _feats(_columns(bob.get("/board?state=doing")[1])["doing"])
    assert every == sorted(every) and len(every) == N // 5 and every[:3] == [2, 7, 12]
    assert every.index(97) < every.index(102)  # string order would put feat-102 first

    # waiting on bob: the questions to him and the review-request he received
    cols = _columns(bob.get("/board?mine=1")[1])
    assert {s: ps for s, ps in cols.items() if ps} == {
        "proposed": ["specs/proposed/feat-10.md"],
        "doing": ["specs/doing/feat-7.md"],
    }
    # by event type, by role, by age, and together
    cols = _columns(bob.get("/board?event=question")[1])
    assert [p for ps in cols.values() for p in ps] == ["specs/doing/feat-7.md"]
    cols = _columns(bob.get("/board?event=review-request")[1])
    assert [p for ps in cols.values() for p in ps] == ["specs/proposed/feat-10.md"]
    cols = _columns(bob.get("/board?role=implementer")[1])
    assert [p for ps in cols.values() for p in ps] == ["specs/blocked/feat-13.md"]
    cols = _columns(bob.get("/board?age=1d")[1])
    assert sorted(p for ps in cols.values() for p in ps) == [
        "specs/blocked/feat-13.md",
        "specs/doing/feat-7.md",
        "specs/proposed/feat-10.md",
    ]
    quiet = _columns(bob.get("/board?age=over7d&state=blocked")[1])["blocked"]
    assert "specs/blocked/feat-13.md" not in quiet and _feats(quiet)[:3] == [3, 8, 18]
    cols = _columns(bob.get("/board?state=doing&mine=1&event=question&role=user")[1])
    assert cols == {"doing": ["specs/doing/feat-7.md"]}
    assert _columns(bob.get("/board?state=todo&mine=1")[1]) == {"todo": []}
    # a decision made on a filtered board comes back to it
    page = bob.get("/board?mine=1")[1]
    assert quote(request, safe="") in page and 'name="back" value="/board?mine=1"' in page
    # nonsense is no filter, never an error
    status, page = bob.get("/board?state=nowhere&event=nothing&age=forever&page=x")
    assert status == 200 and page.count('<article class="card"') == 5 * FOLD

    # in Chromium: the filter form, no script needed
    with chrome() as driver:
        log_in(driver, server.url, BOB, BOB_PASSWORD)
        from selenium.webdriver.support.ui import Select

        def narrow() -> None:  # again when the live stream replaced the form under the hand
            Select(driver.find_element("css selector", "form.filters select[name=state]")).select_by_visible_text(
                "doing"
            )
            mine = driver.find_element("css selector", "form.filters input[name=mine]")
            if not mine.is_selected():
                mine.click()
            driver.find_element("css selector", "form.filters button[type=submit]").click()

        steady(narrow)
        wait_for(driver, lambda d: "state=doing" in d.current_url and "mine=1" in d.current_url, "the filtered board")
        cards = driver.find_elements("css selector", "article.card")
        assert [c.get_attribute("data-path") for c in cards] == ["specs/doing/feat-7.md"]
        assert "question from user ×4" in cards[0].text


OUTSIDE = """
const W = document.documentElement.clientWidth, out = [];
for (const el of document.body.querySelectorAll('*')) {
  const s = getComputedStyle(el);
  if (s.display === 'none' || s.visibility === 'hidden') continue;
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;
  const left = r.left + window.scrollX, right = r.right + window.scrollX, top = r.top + window.scrollY;
  if (left < -0.5 || right > W + 0.5 || top < -0.5)
    out.push(`${el.tagName}.${el.className} [${Math.round(left)}, ${Math.round(right)}] ${(el.textContent || '').trim().slice(0, 40)}`);
}
return {width: W, scroll: document.documentElement.scrollWidth, outside: out,
        checked: document.body.querySelectorAll('*').length};
"""


def _phone(driver: Any) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
    )


def _inside(driver: Any, url: str) -> None:
    got = driver.execute_script(OUTSIDE)
    assert got["width"] == 390, got["width"]
    assert got["checked"] > 20, got
    assert not got["outside"] and got["scroll"] <= 390, (url, got)
    logout = driver.find_element("xpath", "//header//button[normalize-space()='log out']")
    r = driver.execute_script("return arguments[0].getBoundingClientRect().toJSON()", logout)
    assert logout.is_displayed() and r["left"] >= 0 and r["right"] <= 390 and r["top"] >= 0, r


def test_at_phone_width_nothing_is_clipped(project: Project, server: Server) -> None:
    long = "a-rather-long-artifact-name-that-a-person-gave-without-thinking-of-phones-at-all"
    (project.dir / "specs" / "proposed" / f"{long}.md").write_text("# long\n\n" + "word " * 200 + "\n")
    request = project.send(
        "spec-writer", "review-request", f"specs/proposed/{long}.md", "spec-reviewer", CONTEXT="x" * 300
    )
    for i in range(3):
        project.send("user", "question", "specs/proposed/billing.md", "spec-reviewer", QUESTION=f"why {i}? " * 30)
    question = project.send("implementer", "question", "specs/proposed/billing.md", "spec-reviewer", QUESTION="?")
    pages = [
        "/board",
        "/board?state=proposed&mine=1",
        "/inbox",
        "/inbox?all=1",
        f"/thread?id={quote(request, safe='')}",
        f"/thread?id={quote(question, safe='')}",
        "/search?q=why",
        f"/artifact?path=specs/proposed/{long}.md",  # the artifact, its diff, its timeline and the decision
        "/new",
        "/charts",
    ]
    with chrome() as driver:
        _phone(driver)
        log_in(driver, server.url, BOB, BOB_PASSWORD)
        for url in pages:
            driver.get(server.url.rstrip("/") + url)
            wait_for(driver, lambda d: d.find_elements("id", "live"), url)
            _inside(driver, url)
        driver.get(server.url.rstrip("/") + pages[4])  # the decision is there to use
        assert driver.find_element("css selector", "form.decide button.approve").is_displayed()
        driver.get(server.url.rstrip("/") + pages[5])  # and the answer box
        assert driver.find_element("css selector", "form.answer button.answer").is_displayed()
        driver.get(server.url.rstrip("/") + pages[7])  # the artifact page's decision too
        assert driver.find_element("css selector", "form.decide button.approve").is_displayed()
    with chrome() as owner:  # the owner's header: every role to view as
        _phone(owner)
        open_link(owner, owner_link(project))
        for url in ("/board", "/inbox?all=1", "/runs"):
            owner.get(server.url.rstrip("/") + url)
            wait_for(owner, lambda d: d.find_elements("id", "live"), url)
            _inside(owner, url)


def test_natural_order() -> None:
    names = ["feat-10", "feat-2", "Feat-1", "feat-1b", "alpha", "feat-100", "feat-03x"]
    assert sorted(names, key=natural) == ["alpha", "Feat-1", "feat-1b", "feat-2", "feat-03x", "feat-10", "feat-100"]
    assert sorted(["feat-10", "feat-2", "feat-1"], key=natural) == ["feat-1", "feat-2", "feat-10"]
    assert sorted(["v1.10.md", "v1.9.md", "v1.9a.md"], key=natural) == ["v1.9.md", "v1.9a.md", "v1.10.md"]
