"""Host: what the cockpit's route groups (``insight``, ``acting``) use of the server
(``web.server.Web``), named here so that neither imports the server, nor the server them twice."""

from __future__ import annotations

from typing import Protocol

import jinja2
from starlette.requests import Request
from starlette.responses import Response

from workflow.app import App
from workflow.policy.visibility import Sight
from workflow.web.auth import Sessions, Viewer
from workflow.web.pages import Boards


class Web(Protocol):
    """The server as its route groups see it."""

    app: App
    templates: jinja2.Environment
    sessions: Sessions
    boards: Boards

    def _headers(self, r: Response) -> Response: ...

    def html(self, text: str, status: int = 200) -> Response: ...

    def viewer(self, request: Request) -> Viewer | None: ...

    def sight(self, viewer: Viewer) -> Sight: ...

    def layout(
        self, viewer: Viewer, name: str, main: str, params: dict[str, str], flash: str, request: Request
    ) -> str: ...

    def _flash(self, request: Request, viewer: Viewer) -> str: ...
