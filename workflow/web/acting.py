"""Acting: the cockpit's routes for a person's own acts (``own``) — the "New request" page
(``/new``) and the actions its forms, the board's "move to" (and drag and drop, ``static/drag.js``)
and a thread's reply box post to ``/act/{move,request,reply}``, through the server's CSRF and
same-origin checks as every other action."""

from __future__ import annotations

from starlette.routing import Route

from workflow.web import own
from workflow.web.actions import Done
from workflow.web.auth import Viewer
from workflow.web.host import Web


class Acting:
    """A person's own acts on one server (``Web``)."""

    def __init__(self, web: Web) -> None:
        self.web = web
        web.templates.filters["targets"] = lambda state: own.targets(web.app, state)  # a card's "move to"

    def routes(self) -> list[Route]:
        return []

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
