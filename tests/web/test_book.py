"""A page of the cockpit is one record (``web.book``): the server's routes, its page renders and the
nav all read the one table, and no other module keeps a list of pages."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.git import git_project
from workflow.app import App
from workflow.web import book
from workflow.web.server import Web

WEB = Path(__file__).resolve().parents[2] / "workflow" / "web"


def test_every_page_is_routed_and_the_nav_is_the_tables(tmp_path: Path) -> None:
    p = git_project(tmp_path / "p")
    paths = {getattr(r, "path", "") for r in Web(App(p.app.config), local=False).asgi().routes}
    assert {pg.route for pg in book.PAGES} <= paths
    assert all((WEB / "templates" / pg.template).is_file() for pg in book.PAGES)
    layout = (WEB / "templates" / "layout.html").read_text()
    assert "{% for p in nav %}" in layout and not re.search(r'\("board", "inbox"', layout)
    assert book.NAV == tuple(pg.name for pg in book.PAGES if pg.nav)


def test_no_module_keeps_a_list_of_pages_but_the_book() -> None:
    names = "|".join(re.escape(pg.name) for pg in book.PAGES if pg.nav)
    listing = re.compile(rf'\(\s*"(?:{names})",\s*"(?:{names})"')  # a tuple of two page names or more
    found = [
        f"{f.name}:{n}"
        for f in sorted(WEB.rglob("*.py"))
        if f.name != "book.py"
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if listing.search(line)
    ]
    assert found == []
