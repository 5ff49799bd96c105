"""Charts: the cockpit's pictures of flow and cost, drawn as SVG on the server with pygal.

pygal (PyPI) draws SVG in pure Python, with nothing to run in the browser: the cockpit's
Content-Security-Policy allows no inline script and no other origin, and a chart here is an
``<img>`` of ``/chart?name=…`` — an image runs no script at all, and its own response allows
only the SVG's inline styles. Each chart's numbers are also the page's table and
``/charts.json`` (``flow.charts``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

SCRIPT = re.compile(rb"<script\b.*?</script>", re.S)  # pygal's own config script: not needed to draw
NAMES = ("flow", "time_in_state", "runs", "usage", "queue")
TITLES = {
    "flow": "Artifacts entering and leaving each state per day",
    "time_in_state": "Time in state (hours: median, p90)",
    "runs": "Runs per role per day, and failures",
    "usage": "Tokens per role per day, against its daily budget",
    "queue": "Queue depth at the end of each day",
}


def _chart(kind: Callable[..., Any], title: str) -> Any:
    import pygal  # lazy: only a chart's picture needs it
    from pygal.style import CleanStyle

    config = pygal.Config()
    config.js = []  # no script: its default fetches one from elsewhere
    config.disable_xml_declaration = False
    config.width, config.height = 800, 360
    config.legend_at_bottom = True
    config.x_label_rotation = 30
    config.style = CleanStyle
    config.title = title
    return kind(config)


def _by(rows: list[dict[str, Any]], key: str, series: str, value: str) -> tuple[list[str], dict[str, list[float]]]:
    xs = sorted({str(r[key]) for r in rows})
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(str(r[series]), [0.0] * len(xs))[xs.index(str(r[key]))] += float(r[value])
    return xs, out


def svg(name: str, data: dict[str, Any]) -> bytes:
    """The SVG of chart ``name`` over ``data`` (``flow.charts``); KeyError for no such chart."""
    import pygal  # lazy: start-up time; only a chart needs it

    title = TITLES[name]
    rows: list[dict[str, Any]] = data[name]
    if name == "flow":
        c = _chart(pygal.Bar, title)
        days, entered = _by(rows, "day", "state", "entered")
        _, left = _by(rows, "day", "state", "left")
        c.x_labels = days
        for s in sorted(entered):
            c.add(f"{s} in", entered[s])
            c.add(f"{s} out", [-v for v in left.get(s, [0.0] * len(days))])
    elif name == "time_in_state":
        c = _chart(pygal.Bar, title)
        c.x_labels = [r["state"] for r in rows]
        c.add("median", [r["median_hours"] for r in rows])
        c.add("p90", [r["p90_hours"] for r in rows])
    elif name == "runs":
        c = _chart(pygal.StackedBar, title)
        days, ran = _by(rows, "day", "role", "runs")
        _, failed = _by(rows, "day", "role", "failed")
        c.x_labels = days
        for role in sorted(ran):
            c.add(f"{role} ok", [a - b for a, b in zip(ran[role], failed[role], strict=True)])
            c.add(f"{role} failed", failed[role])
    elif name == "usage":
        c = _chart(pygal.Line, title)
        days, tokens = _by(rows, "day", "role", "tokens")
        c.x_labels = days
        for role in sorted(tokens):
            c.add(f"{role} tokens", tokens[role])
            budget = next((r["budget_tokens"] for r in rows if r["role"] == role), 0)
            if budget:
                c.add(f"{role} budget", [budget] * len(days), stroke_style={"dasharray": "6,3"}, show_dots=False)
    else:
        c = _chart(pygal.Line, title)
        c.x_labels = [r["day"] for r in rows]
        c.add("waiting", [r["depth"] for r in rows])
    if not rows:
        c.no_data_text = "no data yet"
    out: bytes = c.render()
    return SCRIPT.sub(b"", out)
