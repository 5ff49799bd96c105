"""Book: every page of the cockpit, declared once — its name, the data its template renders, its
template, its route, whether the header lists it and whether it is live.

``web.server`` reads this table for its routes, for a page's main part (``Web.main``: the same
render a GET and the page's event stream send) and for which pages have a stream; the layout's
nav lists the pages marked ``nav``. A new page is one ``Page`` here and its template: its data
function takes the server (``web.host``), the viewer and the page's query parameters, and raises
``NotFoundError`` for what the viewer may not see or that is not there (one answer for both).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import quote

from workflow.mail.ids import given_msgid
from workflow.web import actions, artifact, charts, find, flow, narrow, own, pages, runs
from workflow.web.auth import Viewer
from workflow.web.host import Web
from workflow.web.runpage import run_page

STREAM = re.compile(r'data-stream="[^"]*"')  # the layout's event stream, blanked on a page that is not live


class NotFoundError(Exception):
    """What the page would show is not there, or not the viewer's to see: 404, one answer for both."""


Data = Callable[[Web, Viewer, Mapping[str, str]], dict[str, Any]]


class Page(NamedTuple):
    name: str
    data: Data  # what the template renders, for this viewer and these parameters
    template: str
    route: str
    nav: bool = False  # listed in the header
    live: bool = True  # its event stream sends it again when what it shows changes
    here: Callable[[Mapping[str, str]], str] | None = None  # its own address, for a form's way back


def _board(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    return narrow.page(web.app, web.sight(viewer), web.boards.board(viewer.role), dict(params))


def _inbox(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    return {"inbox": pages.inbox(web.app, viewer.role, params.get("all") != "1")}


def _thread(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    mid = given_msgid(params.get("id", ""))
    found = pages.thread(web.app, viewer.role, mid) if mid else None
    if found is None:
        raise NotFoundError
    return {"thread": found, "mid": mid}


def _runs(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    return {"runs": runs.runs(web.app, web.sight(viewer)), "steer": actions.may_steer(web.app, viewer.roles)}


def _search(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    q = params.get("q", "")
    return {"search": pages.search(web.app, web.sight(viewer), q), "found": find.artifacts(web.app.config, q)}


def _artifact(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    art = artifact.page(web.app, web.sight(viewer), params.get("path", ""), params.get("a", ""), params.get("b", ""))
    if art is None:
        raise NotFoundError
    return {"art": art}


def _run(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    task = params.get("task", "")
    found = run_page(web.app, web.sight(viewer), int(task)) if task.isdigit() else None
    if found is None:
        raise NotFoundError
    return {"run": found}


def _charts(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    return {"data": flow.charts(web.app), "names": charts.NAMES, "titles": charts.TITLES}


def _new(web: Web, viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    """What the new-request form offers: roles to send to, artifacts to pick, roots to write in."""
    roster = web.app.roster
    to = sorted({*roster.roles, *roster.panels} - {viewer.role})
    paths = [a.path for a in own.artifacts(web.app)]
    return {"form": {"to": to, "paths": paths, "roots": web.app.config.artifact_roots, "events": own.REQUESTS}}


PAGES: tuple[Page, ...] = (
    Page("board", _board, "board.html", "/board", nav=True),
    Page("inbox", _inbox, "inbox.html", "/inbox", nav=True),
    Page("thread", _thread, "thread.html", "/thread", here=lambda p: f"/thread?id={quote(p.get('id', ''), safe='')}"),
    Page("runs", _runs, "runs.html", "/runs", nav=True),
    Page("charts", _charts, "charts.html", "/charts", nav=True, live=False),
    Page("search", _search, "search.html", "/search", nav=True),
    Page(
        "artifact",
        _artifact,
        "artifact.html",
        "/artifact",
        here=lambda p: f"/artifact?path={quote(p.get('path', ''), safe='')}",
    ),
    Page("run", _run, "run.html", "/run", live=False, here=lambda p: f"/run?task={quote(p.get('task', ''))}"),
    Page("new", _new, "new.html", "/new", live=False),
)
BY_NAME: Mapping[str, Page] = MappingProxyType({p.name: p for p in PAGES})
LIVE: frozenset[str] = frozenset(p.name for p in PAGES if p.live)
NAV: tuple[str, ...] = tuple(p.name for p in PAGES if p.nav)
PARAMS = ("id", "all", "q", "path", "a", "b", "task", *narrow.PARAMS)  # the query parameters pages take
