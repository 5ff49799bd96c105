"""Acting: the cockpit's routes for a person's own acts (``own``) — the "New request" page
(``/new``) and the actions its forms, the board's "move to" (and drag and drop, ``static/drag.js``)
and a thread's reply box post to ``/act/{move,request,reply}``, through the server's CSRF and
same-origin checks as every other action."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workflow.web import own
from workflow.web.actions import Done
from workflow.web.auth import Viewer
from workflow.web.host import Web
from workflow.web.insight import STREAM


class Acting:
    """A person's own acts on one server (``Web``)."""

    def __init__(self, web: Web) -> None:
        self.web = web
        web.templates.filters["targets"] = lambda state: own.targets(web.app, state)  # a card's "move to"

    def routes(self) -> list[Route]:
        return [Route("/new", self.new)]

    def act(self, what: str, viewer: Viewer, f: dict[str, str]) -> Done:
        """The action ``what`` as ``viewer``'s role (called holding the server's acting lock)."""
        app, role = self.web.app, viewer.role
        if what == "move":
            return own.move_card(
                app, role, f.get("path", ""), f.get("state", ""), f.get("reason", ""), f.get("tell", "")
            )
        if what == "request":
            return own.new_request(app, role, f)
        if what == "reply":
            return own.reply(app, role, f.get("id", ""), f.get("text", ""))
        return Done(False, f"no action {what!r}")

    def choices(self, viewer: Viewer) -> dict[str, Any]:
        """What the new-request form offers: roles to send to, artifacts to pick, roots to write in."""
        roster = self.web.app.roster
        to = sorted({*roster.roles, *roster.panels} - {viewer.role})
        paths = [a.path for a in own.artifacts(self.web.app)]
        return {"to": to, "paths": paths, "roots": self.web.app.config.artifact_roots, "events": own.REQUESTS}

    async def new(self, request: Request) -> Response:
        viewer = self.web.viewer(request)
        if viewer is None:
            return self.web._headers(RedirectResponse("/login", 303))
        form = await asyncio.to_thread(self.choices, viewer)
        csrf = self.web.sessions.csrf(viewer)
        main = self.web.templates.get_template("new.html").render(form=form, csrf=csrf, viewer=viewer)
        flash = self.web._flash(request, viewer)
        page = self.web.layout(viewer, "new", main, {}, flash, request)
        r = self.web.html(STREAM.sub('data-stream=""', page, count=1))  # a form: not live
        if flash:
            r.delete_cookie("workflow_flash", path="/")
        return r
