"""Server: the ASGI app of ``workflow web`` (starlette, served by uvicorn) — routes, sessions,
CSRF and origin checks, security headers, and the event stream that keeps pages live.

Every page is rendered on the server from the library (``pages``), escaped by jinja2's
autoescape; the only script is the vendored ``static/live.js`` (no inline script: the
Content-Security-Policy allows none, nor any other origin). Every POST needs the session's CSRF
token and, when the browser says where it comes from (``Origin``, ``Sec-Fetch-Site``), this
origin. A page's main part is also what its event stream sends when it changes (``/events``):
rendered for that stream's viewer by the same code, so a stream never carries what its page may not.

On loopback it holds its port on both families (``listeners.reserve_loopback``: 127.0.0.1 and
::1), answers only to one name — a request naming another loopback host (``localhost``,
``[::1]``) is sent to it, any other name is refused (DNS rebinding) — and the owner logs in with
a one-time link (``once``) that names it, asked for over ``<state>/sock/web``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import ipaddress
import json
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from workflow.app import App
from workflow.artifacts.board import age
from workflow.core.config import Config
from workflow.core.errors import WorkflowError
from workflow.core.senders import who
from workflow.delivery.server.current import Current
from workflow.mail.body import part_text
from workflow.mail.ids import given_msgid
from workflow.policy.roster import Roster
from workflow.policy.visibility import Sight
from workflow.web import actions, book, narrow, once, pages, runs
from workflow.web.acting import Acting
from workflow.web.auth import COOKIE, Sessions, Viewer
from workflow.web.book import NotFoundError
from workflow.web.insight import Insight
from workflow.web.live import Watch

log = logging.getLogger(__name__)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make the browser send `Origin: null` with a form
    "Cache-Control": "no-store",
}
FLASH = "workflow_flash"
KEEPALIVE = 15.0  # seconds between comments on an idle event stream
MAX_PAUSE = 2.0  # seconds a page's stream rests after a render at most (twice what the render took)
PARAMS = book.PARAMS  # the query parameters a page (and its stream) takes
MAX_FORM = 64 * 1024
OWNER_REFUSED = (
    "The owner does not log in with a password here, and the cockpit never asks for the owner's secret: "
    "run `workflow web login` and open the one-time link it prints."
)
LINK_REFUSED = (
    "This login link was used already or expired (or its server restarted): `workflow web login` prints a new one."
)


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("workflow.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = lambda ts: age(int(ts), time.time())
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M", time.gmtime(int(ts))) if ts else "?"
    env.filters["style"] = pages.style
    env.filters["collapse"] = narrow.collapsed
    env.filters["q"] = functools.lru_cache(maxsize=1 << 16)(
        lambda s: quote(str(s), safe="")
    )  # the same ids each render
    return env


class Web:
    """One ``workflow web`` server: the app it serves and what it shares between requests."""

    def __init__(
        self,
        app: App,
        https: bool = False,
        env: dict[str, str] | None = None,
        kept: Callable[[], None] = lambda: None,
        local: bool = True,
        origin: str | None = None,
        links: socket.socket | None = None,
    ) -> None:
        self.app = app
        self.kept = kept  # after a board is made whole (``keep_out_of_gc`` in the server's process)
        self.https = https
        self.sessions = Sessions(app, env)
        self.templates = _templates()
        self.templates.filters["who"] = lambda address: who(str(address), self.app.config.domain)  # as it is now
        self.watch = Watch(app, before=self.fresh)
        self.current = Current(app.config, app.roster, self._adopt)
        self.boards = pages.Boards(app, self.kept)
        self.acting = threading.Lock()  # one action at a time: a double click's second post sees the first's move
        self.local = local  # listening on loopback: a request must name a loopback host (no DNS rebinding)
        self.origin = origin  # http://127.0.0.1:PORT: the one name it answers to on loopback, its links'
        self.links = links  # the Unix socket the owner asks for a login link (``once``)
        self.static = {
            name: resources.files("workflow.web").joinpath("static", name).read_bytes()
            for name in ("app.css", "live.js", "drag.js")
        }
        self.insight = Insight(self)
        self.own = Acting(self)  # a person's moves, new requests and replies

    def _adopt(self, config: Config, roster: Roster) -> None:
        """workflow.toml or a role file changed: serve with what they say now (``delivery.server.current``),
        as the SMTP server does — a member taken off a panel sees its threads no more."""
        app = App(config)
        app.__dict__["roster"] = roster  # App.roster is a cached_property: the roster just loaded
        self.app = self.sessions.app = self.watch.app = app
        self.boards = pages.Boards(app, self.kept)  # boards made with the old roster are not this one's
        self.sessions.users_roster(roster)

    def fresh(self) -> None:
        """Take the project's files as they are now (a stat of an inotify descriptor when unchanged)."""
        self.current.refresh()

    # -- the ASGI app

    def asgi(self) -> Starlette:
        routes = [
            Route("/", self.root),
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/role", self.switch, methods=["POST"]),
            *(Route(p.route, self.page(p.name)) for p in book.PAGES),
            Route("/part", self.part),
            Route("/transcript", self.transcript),
            Route("/events", self.events),
            Route("/act/{what}", self.act, methods=["POST"]),
            Route("/static/{name}", self.static_file),
            *self.insight.routes(),  # /run, /charts, /charts.json, /chart, /metrics
            *self.own.routes(),  # /new
        ]

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            task = asyncio.create_task(self.watch.run())
            asking = None
            if self.links is not None:
                asking = await asyncio.start_unix_server(
                    functools.partial(once.answer, link=self.link), sock=self.links
                )
            finishing = asyncio.create_task(asyncio.to_thread(self.finish_pending))
            try:
                yield
            finally:
                task.cancel()
                if asking is not None:
                    asking.close()
                finishing.cancel()

        app = Starlette(routes=routes, lifespan=lifespan, middleware=[self.insight.middleware()])
        return self._hosted(app) if self.local else app

    def _hosted(self, app: Starlette) -> Any:
        """Refuse a request naming another host than loopback's (a page of a rebound DNS name), and
        send one naming another loopback host than this server's (``localhost``, ``[::1]``) to
        its name: cookies, and the link the owner opens, belong to one name only."""
        mine = urlsplit(self.origin).netloc.encode() if self.origin else None

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                raw = dict(scope["headers"]).get(b"host", b"")
                host = raw.decode("latin-1")
                r: Response | None = None
                if not _loopback_name(host):
                    r = PlainTextResponse(
                        f"refused: {host[:100]!r} is not this server's name (use its loopback address)", 403
                    )
                elif mine is not None and raw != mine:
                    path = (scope.get("raw_path") or quote(scope.get("path", "/")).encode()).decode("latin-1")
                    query = scope.get("query_string", b"").decode("latin-1")
                    where = f"{self.origin}{path}" + ("?" + query if query else "")
                    r = self._headers(RedirectResponse(where, 307))
                if r is not None:
                    await r(scope, receive, send)
                    return
            await app(scope, receive, send)

        return guarded

    def link(self) -> str:
        """A new one-time login link for the owner (good once, for ``once.LINK_SECONDS``)."""
        return f"{self.origin or ''}/login?{urlencode({'once': self.sessions.links.mint()})}"

    def _headers(self, r: Response) -> Response:
        for k, v in HEADERS.items():
            r.headers.setdefault(k, v)
        return r

    def html(self, text: str, status: int = 200) -> Response:
        return self._headers(HTMLResponse(text, status))

    def say(self, text: str, status: int) -> Response:
        """A refusal as a page of escaped text, with the way back."""
        body = f'<!doctype html><meta charset="utf-8"><title>{status}</title><p>{escape(text)}</p><p><a href="/board">back</a></p>'
        return self.html(body, status)

    def viewer(self, request: Request) -> Viewer | None:
        """The request's session (every handler asks first: the project's files are taken fresh here)."""
        return self.session(request.cookies.get(COOKIE))

    def session(self, cookie: str | None) -> Viewer | None:
        self.fresh()
        viewer = self.sessions.viewer(cookie)
        if viewer is None:
            return None
        roles = self.roles_of(viewer)
        if viewer.role not in roles:  # the role it viewed as is gone from the roster (a reload)
            if not roles:
                return None
            viewer = viewer._replace(role=self.app.config.default_sender if viewer.owner else roles[0])
        return viewer

    def _set_cookie(self, r: Response, name: str, value: str, max_age: int | None) -> None:
        r.set_cookie(name, value, max_age=max_age, path="/", httponly=True, samesite="strict", secure=self.https)

    # -- pages

    async def root(self, request: Request) -> Response:
        return self._headers(RedirectResponse("/board" if self.viewer(request) else "/login", 303))

    async def login_page(self, request: Request) -> Response:
        """The login form; with ``?once=``, the owner's one-time link redeemed (or refused)."""
        token = request.query_params.get("once")
        if token is None:
            return self._form()
        viewer = await self.sessions.redeem(_peer(request), token)
        return self._form(LINK_REFUSED, 403) if viewer is None else self._logged_in(viewer)

    def _form(self, error: str = "", status: int = 200) -> Response:
        return self.html(self.templates.get_template("login.html").render(error=error, viewer=None), status)

    async def login(self, request: Request) -> Response:
        if not self._same_origin(request):
            return self.say("cross-origin form refused", 403)
        form = await request.form(max_files=0, max_fields=8)
        login, password = str(form.get("login", ""))[:200].strip(), str(form.get("password", ""))[:1000]
        if login.startswith("~"):  # checked against nothing: the owner's secret is never taken here
            return self._form(OWNER_REFUSED, 403)
        viewer = await self.sessions.login(_peer(request), login, password)
        if viewer is None:
            return self._form("wrong login or password", 401)
        return self._logged_in(viewer)

    def _logged_in(self, viewer: Viewer) -> Response:
        r = RedirectResponse("/board", 303)
        self._set_cookie(r, COOKIE, self.sessions.cookie(viewer), int(viewer.expires - time.time()))
        return self._headers(r)

    async def logout(self, request: Request) -> Response:
        viewer, refused = await self._posted(request)
        if refused is not None or viewer is None:
            return refused or self.say("not logged in", 401)
        await asyncio.to_thread(self.sessions.end, viewer)
        r = RedirectResponse("/login", 303)
        r.delete_cookie(COOKIE, path="/")
        return self._headers(r)

    async def switch(self, request: Request) -> Response:
        viewer, refused = await self._posted(request)
        if refused is not None or viewer is None:
            return refused or self.say("not logged in", 401)
        role = str((await request.form()).get("role", ""))
        if role not in self.roles_of(viewer):
            return self.say(f"{viewer.login} may not view as {role!r}", 403)
        r = RedirectResponse(self._back(str((await request.form()).get("back", "/board"))), 303)
        v = viewer._replace(role=role)
        self._set_cookie(r, COOKIE, self.sessions.cookie(v), int(v.expires - time.time()))
        return self._headers(r)

    def roles_of(self, viewer: Viewer) -> list[str]:
        """The identities a viewer may switch to: the owner any role, panel or member."""
        roster = self.app.roster
        if viewer.roles is not None:
            return [r for r in viewer.roles if r in roster.roles or r in roster.members or r in roster.panels]
        return sorted({*roster.roles, *roster.panels, *roster.members})

    def page(self, name: str) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            viewer = self.viewer(request)
            if viewer is None:
                return self._headers(RedirectResponse("/login", 303))
            params = {k: request.query_params[k][:200] for k in PARAMS if k in request.query_params}
            try:
                main = await asyncio.to_thread(self.main, name, viewer, params)
            except NotFoundError:
                return self.html(self.layout(viewer, name, "<p>Not found.</p>", {}, "", request), 404)
            except (WorkflowError, sqlite3.Error, OSError) as e:
                return self.html(self.layout(viewer, name, _trouble(e), {}, "", request), 503)
            flash = self._flash(request, viewer)
            text = self.layout(viewer, name, main, params, flash, request)
            if not book.BY_NAME[name].live:  # a form, a run's record, a picture of the past: no stream
                text = book.STREAM.sub('data-stream=""', text, count=1)
            r = self.html(text)
            if flash:
                r.delete_cookie(FLASH, path="/")
            return r

        return handler

    def main(self, name: str, viewer: Viewer, params: dict[str, str]) -> str:
        """A page's main part for ``viewer``: what the page shows and its event stream sends (``book``)."""
        page = book.BY_NAME[name]
        here = page.here(params) if page.here is not None else page.route
        common: dict[str, Any] = {"csrf": self.sessions.csrf(viewer), "viewer": viewer, "here": here}
        return self.templates.get_template(page.template).render(**{**common, **page.data(self, viewer, params)})

    def sight(self, viewer: Viewer) -> Sight:
        """What ``viewer`` may read (``Sight``): the one judge of every page, stream and link."""
        return Sight.of(self.app.roster, viewer.role, viewer.owner)

    def layout(self, viewer: Viewer, name: str, main: str, params: dict[str, str], flash: str, request: Request) -> str:
        stream = "/events?" + urlencode({"page": name, **params, "v": _digest(main)})
        return self.templates.get_template("layout.html").render(
            viewer=viewer,
            page=name,
            main=main,
            stream=stream,
            flash=json.loads(flash) if flash else None,
            csrf=self.sessions.csrf(viewer),
            roles=self.roles_of(viewer),
            nav=book.NAV,
            back=request.url.path + (("?" + request.url.query) if request.url.query else ""),
        )

    # -- attachments

    async def part(self, request: Request) -> Response:
        viewer = self.viewer(request)
        if viewer is None:
            return self._headers(RedirectResponse("/login", 303))
        mid = given_msgid(request.query_params.get("id", ""))
        found = await asyncio.to_thread(pages.message, self.app, viewer.role, mid) if mid else None
        try:
            number = int(request.query_params.get("n", ""))
            if found is None:
                raise NotFoundError
            part, text = part_text(found[1], number)
        except (ValueError, NotFoundError, WorkflowError):
            return self._headers(PlainTextResponse("not found", 404))
        r = PlainTextResponse(text)
        r.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
        name = part.name or f"part-{number}.txt"
        r.headers["Content-Disposition"] = f"inline; filename*=UTF-8''{quote(name)}"
        return self._headers(r)

    async def transcript(self, request: Request) -> Response:
        """A run's transcript, as text, for those who read its role's mail (the owner: any)."""
        viewer = self.viewer(request)
        if viewer is None:
            return self._headers(RedirectResponse("/login", 303))
        try:
            task = int(request.query_params.get("task", ""))
        except ValueError:
            return self._headers(PlainTextResponse("no task number given (/transcript?task=N)", 404))
        code, text = await asyncio.to_thread(runs.transcript_for, self.app, self.sight(viewer), task)
        r = PlainTextResponse(text, code)
        r.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
        if code == 200:
            r.headers["Content-Disposition"] = f"inline; filename=task-{task}-transcript.txt"
        return self._headers(r)

    # -- the event stream

    async def events(self, request: Request) -> Response:
        viewer = self.viewer(request)
        name = request.query_params.get("page", "")
        if viewer is None or name not in book.LIVE:
            return self._headers(
                PlainTextResponse("not logged in" if viewer is None else "no such page", 401 if viewer is None else 404)
            )
        params = {k: request.query_params[k][:200] for k in PARAMS if k in request.query_params}
        before = self.watch.version  # taken before the render: a change during it is sent next
        try:
            first = await asyncio.to_thread(self.main, name, viewer, params)
        except NotFoundError:
            return self._headers(PlainTextResponse("not found", 404))
        except (WorkflowError, sqlite3.Error, OSError) as e:
            first = _trouble(e)
        cookie = request.cookies.get(COOKIE)

        async def stream() -> AsyncIterator[bytes]:
            sent = request.query_params.get("v", "")
            main, seen, took = first, before, 0.0
            yield b"retry: 1000\n\n"
            while True:
                digest = _digest(main)
                if digest != sent:
                    sent = digest
                    yield b"event: main\ndata: " + json.dumps(main).encode() + b"\n\n"
                else:
                    yield b": idle\n\n"
                if await request.is_disconnected():
                    return
                await asyncio.sleep(min(MAX_PAUSE, 2 * took))  # a burst of mail: at most a third of a core per page
                version = await self.watch.wait(seen, KEEPALIVE)
                current = self.session(cookie)  # a login removed or changed ends its streams
                if current is None:
                    yield b'event: gone\ndata: ""\n\n'
                    return
                if version == seen:
                    continue  # nothing changed: a comment keeps the connection open
                seen, start = version, time.monotonic()
                try:
                    main = await asyncio.to_thread(self.main, name, current, params)
                except NotFoundError:
                    yield b'event: gone\ndata: ""\n\n'
                    return
                except (WorkflowError, sqlite3.Error, OSError) as e:
                    main = _trouble(e)
                took = time.monotonic() - start

        r = StreamingResponse(stream(), media_type="text/event-stream")
        r.headers["X-Accel-Buffering"] = "no"
        return self._headers(r)

    # -- actions

    async def _posted(self, request: Request) -> tuple[Viewer | None, Response | None]:
        """The viewer of a POST that passed the origin and CSRF checks, or the refusal."""
        if not self._same_origin(request):
            return None, self.say("refused: this form came from another site", 403)
        viewer = self.viewer(request)
        if viewer is None:
            return None, self.say("not logged in", 401)
        if int(request.headers.get("content-length") or 0) > MAX_FORM:
            return None, self.say("form too large", 413)
        form = await request.form(max_files=0, max_fields=16)
        if not self.sessions.csrf_ok(viewer, str(form.get("csrf", ""))):
            return None, self.say(
                "refused: the form's CSRF token is missing or not this session's; reload the page", 403
            )
        return viewer, None

    def _same_origin(self, request: Request) -> bool:
        """From this origin: its Origin says so, or (none sent) its Referer does, and its
        Sec-Fetch-Site does not say otherwise; a client sending neither still needs the token."""
        here = f"{request.url.scheme}://{request.url.netloc}"
        origin = request.headers.get("origin")
        if origin is not None:
            return origin == here
        referer = request.headers.get("referer")
        if referer is not None and not (referer == here or referer.startswith(here + "/")):
            return False
        return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")

    async def act(self, request: Request) -> Response:
        viewer, refused = await self._posted(request)
        if refused is not None or viewer is None:
            return refused or self.say("not logged in", 401)
        form = await request.form()
        f = {k: str(v) for k, v in form.items()}
        what = request.path_params["what"]
        done = await asyncio.to_thread(self._do, what, viewer, f)
        r = RedirectResponse(self._back(f.get("back", "/board")), 303)
        self._set_cookie(r, FLASH, self.sessions.seal(viewer, json.dumps(done._asdict())), 60)
        return self._headers(r)

    def _do(self, what: str, viewer: Viewer, f: dict[str, str]) -> actions.Done:
        with self.acting:
            try:
                return self._act(what, viewer, f)
            except (sqlite3.Error, OSError) as e:
                return actions.Done(False, f"{type(e).__name__}: {e} (`workflow doctor` says what is wrong)")

    def _act(self, what: str, viewer: Viewer, f: dict[str, str]) -> actions.Done:
        role = viewer.role
        if what == "decide":
            return actions.decide(self.app, role, f.get("id", ""), f.get("verdict", ""), f.get("reason", ""))
        if what == "answer":
            return actions.answer(self.app, role, f.get("id", ""), f.get("text", ""), f.get("unblock") == "1")
        if what in ("resume", "retry"):
            if not actions.may_steer(self.app, viewer.roles):
                return actions.Done(
                    False, f"{viewer.login} may not {what}: the owner and the roles agentd escalates to may"
                )
            if what == "resume":
                return actions.resume(self.app, viewer.login, f.get("role", ""))
            try:
                return actions.retry(self.app, viewer.login, int(f.get("task", "")))
            except ValueError:
                return actions.Done(False, "no task number given")
        return self.own.act(what, viewer, f)  # move, request, reply

    def finish_pending(self) -> None:
        """At start: carry out the decisions a crashed cockpit left half done (``agentd.pending``)."""
        with self.acting:
            try:
                actions.finish_pending(self.app)
            except Exception:  # agentd tries again; the cockpit serves on
                log.exception("finishing the decisions left pending failed")

    def _back(self, path: str) -> str:
        return path if path.startswith("/") and not path.startswith("//") and "\\" not in path else "/board"

    def _flash(self, request: Request, viewer: Viewer) -> str:
        """The outcome of this session's last action (a cookie only this server, for this session, signs)."""
        text = self.sessions.unseal(viewer, request.cookies.get(FLASH, ""))
        try:
            d = json.loads(text) if text else None
        except ValueError:
            return ""
        return json.dumps(d) if isinstance(d, dict) and {"ok", "text", "rule"} <= set(d) else ""

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        data = self.static.get(name)
        if data is None:
            return self._headers(PlainTextResponse("not found", 404))
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        r = Response(data, media_type=kind)
        r.headers["Cache-Control"] = "max-age=300"
        return self._headers(r)


def _peer(request: Request) -> str:
    return request.client.host if request.client else "-"


def _loopback_name(host: str) -> bool:
    """Whether a Host header names a loopback address (``127.0.0.1:8026``, ``[::1]:8026``, ``localhost``)."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _trouble(e: Exception) -> str:
    """What a page shows when what it reads is broken: the problem and what to do about it."""
    what = str(e) if isinstance(e, WorkflowError) else f"{type(e).__name__}: {e}"
    todo = "" if "workflow " in what else " `workflow doctor` says what is wrong and how to mend it."
    if isinstance(e, sqlite3.DatabaseError) and "index" not in what:
        todo += " If it is the index, `workflow reindex` rebuilds it from the Maildirs."
    return f'<p class="flash refused" role="alert">This page cannot be shown: {escape(what)}.{escape(todo)}</p>'


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
