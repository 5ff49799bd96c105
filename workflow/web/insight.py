"""Insight: the cockpit's routes that look back — a run's page (``/run?task=N``), the charts of
flow and cost (``/charts``, each chart's picture ``/chart?name=…``, their numbers
``/charts.json``) and ``/metrics`` for Prometheus.

A run's page is for those who read its role's mail (``runpage``): to anyone else it is 404. The
charts and their numbers are every logged-in viewer's (a role's runs, tokens and cost are on the
runs page for all). ``/metrics`` answers a logged-in viewer, or a scraper sending
``Authorization: Bearer`` with ``[web] metrics_token`` (when one is set).
"""

from __future__ import annotations

import asyncio
import hmac
import re

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from workflow.web import charts, flow
from workflow.web.host import Web
from workflow.web.metrics import Metrics, Timing

STREAM = re.compile(r'data-stream="[^"]*"')
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'"


class Insight:
    """The looking-back routes of one server (``Web``)."""

    def __init__(self, web: Web) -> None:
        self.web = web
        self.metrics = Metrics(web)

    def routes(self) -> list[Route]:
        return [
            Route("/charts.json", self.charts_json),
            Route("/chart", self.chart),
            Route("/metrics", self.scrape),
        ]

    def middleware(self) -> Middleware:
        """Each HTTP request's time counted by its route (``Timing``)."""
        return Middleware(Timing, latency=self.metrics.latency)

    async def charts_json(self, request: Request) -> Response:
        if self.web.viewer(request) is None:
            return self.web._headers(PlainTextResponse("not logged in", 401))
        data = await asyncio.to_thread(flow.charts, self.web.app)
        return self.web._headers(JSONResponse(data))

    async def chart(self, request: Request) -> Response:
        if self.web.viewer(request) is None:
            return self.web._headers(PlainTextResponse("not logged in", 401))
        name = request.query_params.get("name", "")
        if name not in charts.NAMES:
            return self.web._headers(PlainTextResponse("no such chart", 404))
        data = await asyncio.to_thread(flow.charts, self.web.app)
        body = await asyncio.to_thread(charts.svg, name, data)
        r = Response(body, media_type="image/svg+xml")
        r.headers["Content-Security-Policy"] = SVG_CSP
        return self.web._headers(r)

    async def scrape(self, request: Request) -> Response:
        token = self.web.app.config.web.metrics_token
        given = request.headers.get("authorization", "")
        by_token = bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
        if not by_token and self.web.viewer(request) is None:
            return self.web._headers(
                PlainTextResponse("not logged in (or send [web] metrics_token as a Bearer token)", 401)
            )
        body = await asyncio.to_thread(self.metrics.text)
        return self.web._headers(Response(body, media_type="text/plain; version=0.0.4; charset=utf-8"))
