"""What a person sees in the cockpit is what their role may read, on every page and stream: bob
(spec-reviewer, in no panel) crawls every route the server has — enumerated from its routing
table, so a new page is crawled too — with a real HTTP client, its live streams while other roles'
and a panel's internal mail flows and runs log, and its pages in Chromium; none carries a word,
subject or Message-ID of mail he may not read. The owner sees every run; a role's reader sees its
runs' logs and transcripts; to others a run's transcript is not there (404, as for no such run)."""

from __future__ import annotations

import html
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, quote, quote_plus, urlencode, urlsplit

from helpers.agentd import wait_until
from helpers.browser import chrome, log_in, wait_for
from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Client, Server, owner_link
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.agents.report import RunReport
from workflow.app import App
from workflow.policy.visibility import Sight
from workflow.web.book import LIVE
from workflow.web.server import Web


def _run(p: Project, role: str, log: str, session: str, transcript: str, done: bool = True) -> int:
    """A run of ``role`` as agentd leaves it: its task, log, report and its CLI's transcript."""
    with Tasks(p.app.config.state.tasks) as tasks:
        t, _ = tasks.enqueue(role, [f"<{role}-{session}@workflow.local>"])
        claimed = tasks.claim(10)
        assert claimed is not None and claimed.id == t.id
        if done:
            tasks.finish(t.id, TaskStatus.COMPLETED, "")
    runs = p.app.config.state.runs
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"task-{t.id}.log").write_text(log)
    RunReport(True, usage={"input_tokens": 10, "output_tokens": 5}, session=session).write(runs / f"task-{t.id}.json")
    home = p.app.config.state.cli(role) / "claude" / "projects" / "-w"
    home.mkdir(parents=True, exist_ok=True)
    (home / f"{session}.jsonl").write_text(json.dumps({"type": "assistant", "text": transcript}) + "\n")
    return t.id


def _forbidden(p: Project, extra: tuple[str, ...]) -> set[str]:
    """Every Message-ID and subject of mail bob may not read (in the forms a page would carry them),
    and ``extra`` words; a subject bob's own mail has too is his to see."""
    app = App(p.app.config)
    sight = Sight.of(app.roster, "spec-reviewer")
    with app.index() as index:
        index.refresh()
        rows = index.query(None)
        mine = sight.readable(index, [r.message_id for r in rows])
    theirs = [r for r in rows if r.message_id and r.message_id not in mine]
    assert theirs, "no mail bob may not read: the crawl would prove nothing"
    subjects = {r.subject for r in rows if r.message_id in mine}
    out = set(extra)
    for r in theirs:
        mid = r.message_id or ""
        out |= {mid.strip("<>"), quote(mid, safe=""), html.escape(mid.strip("<>"))}
        if r.subject not in subjects:
            out |= {r.subject, html.escape(r.subject)}
    return out


def _leaks(text: str, forbidden: set[str], asked: str = "") -> list[str]:
    """What of ``forbidden`` ``text`` carries, beyond the echo of what the request ``asked`` (a
    page's own URL, in its stream's address and its forms' way back: bob's words, not the mail's)."""
    for values in parse_qs(urlsplit(asked).query).values():
        for v in values:
            for form in sorted({quote_plus(v), quote(v, safe=""), html.escape(v)}, key=len, reverse=True):
                text = text.replace(html.escape(form), "").replace(form, "")
    return sorted(f for f in forbidden if f and f in text)


class Stream:
    """One event stream read in a thread: the `main` events it sent so far."""

    def __init__(self, server: Server, client: Client, query: str) -> None:
        req = urllib.request.Request(server.url + "events?" + query)
        req.add_header("Cookie", "; ".join(f"{c.name}={c.value}" for c in client.jar))
        self.mains: list[str] = []
        self.r = urllib.request.urlopen(req, timeout=30)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        data = b""
        try:
            for line in self.r:
                if line.startswith(b"data: ") and data.startswith(b"event: main"):
                    self.mains.append(json.loads(line[6:]))
                data = line if line.startswith(b"event:") else data
        except (OSError, ValueError, AttributeError):  # closed under the read: the test is done
            return

    def close(self) -> None:
        """Hang up (a shutdown of the socket: ``close`` would wait for the reading thread)."""
        sock = getattr(getattr(self.r.fp, "raw", None), "_sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)


def _routes(project: Project) -> list[str]:
    """The GET paths of the server's routing table, as the server itself builds it."""
    routes = Web(App(project.app.config), local=False).asgi().routes
    paths = [r.path for r in routes if "GET" in (getattr(r, "methods", None) or {"GET"})]  # type: ignore[attr-defined]
    assert "/runs" in paths and "/transcript" in paths and "/events" in paths, paths
    return paths


def _urls(paths: list[str], mids: list[str], tasks: list[int]) -> list[str]:
    """Each GET route with each value of each parameter a page takes (and none)."""
    values: dict[str, list[str]] = {
        "id": mids,
        "task": [str(t) for t in tasks],
        "all": ["1"],
        "page": sorted(LIVE),
        "q": ["review", "zebra", "okapi", "narwhal", "question", "billing"],
    }
    out = []
    for path in paths:
        if "{name}" in path:
            out += [path.replace("{name}", n) for n in ("app.css", "live.js")]
            continue
        if "{" in path or path == "/events":
            continue  # /events is read as a stream below
        out.append(path)
        for key, vals in values.items():
            out += [f"{path}?{urlencode({key: v})}" for v in vals]
        out += [f"{path}?{urlencode({'id': m, 'n': n})}" for m in mids for n in ("1", "2")]
    return out


def test_bob_crawls_every_page_and_stream_and_finds_nothing_he_may_not_read(project: Project, server: Server) -> None:
    request = project.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    project.send("spec-writer", "question", "specs/proposed/billing.md", "implementer", QUESTION="zebra-of-the-writer")
    project.send(
        "spec-writer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-writer-panel-internal",
        QUESTION="okapi-inside-the-panel",
    )
    project.send("implementer", "status-update", "specs/proposed/billing.md", "spec-writer", CONTEXT="narwhal-status")
    own = _run(project, "spec-reviewer", "bob-reads-this-log\n", "sessbobown", "bob-reads-this-transcript")
    other = _run(
        project,
        "implementer",
        "Re: [QUESTION] billing: zebra-of-the-writer\n",
        "sessimplementer",
        "walrus-in-a-transcript",
    )
    panel_mid = _internal_mid(project)
    panel = _run(project, "spec-writer-panel", f"member claude asked in {panel_mid}\n", "sesspanelrun", "panel-talk")
    secrets = (
        "zebra-of-the-writer",
        "okapi-inside-the-panel",
        "narwhal-status",
        "walrus-in-a-transcript",
        "panel-talk",
    )

    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    pages = [
        p for p in sorted(LIVE) if p not in ("thread", "artifact")
    ]  # a thread's and an artifact's need theirs (next)
    streams = [Stream(server, bob, urlencode({"page": p, "v": "stale"})) for p in pages]
    streams += [Stream(server, bob, urlencode({"page": "thread", "id": request, "v": "stale"}))]
    for path in ("specs/proposed/user-auth.md", "specs/proposed/billing.md"):  # his, and one he is not asked about
        streams += [Stream(server, bob, urlencode({"page": "artifact", "path": path, "v": "stale"}))]

    # every page: what bob may read is there, nothing else
    with project.app.index() as index:
        index.refresh()
        mids = sorted({r.message_id for r in index.query(None) if r.message_id})
    urls = _urls(_routes(project), mids, [own, other, panel])
    forbidden = _forbidden(project, secrets)
    seen = {}
    for url in urls:
        try:
            status, body = bob.get(url)
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode()
        seen[url] = status
        assert not _leaks(body, forbidden, url), (url, _leaks(body, forbidden, url))
    assert seen["/runs"] == 200 and seen[f"/transcript?task={own}"] == 200
    assert seen[f"/transcript?task={other}"] == 404 and seen[f"/transcript?task={panel}"] == 404  # as no such run
    runs = bob.get("/runs")[1]
    assert "bob-reads-this-log" in runs and f'href="/transcript?task={own}"' in runs
    assert f'href="/transcript?task={other}"' not in runs and "implementer" in runs  # listed, not read
    assert "bob-reads-this-transcript" in bob.get(f"/transcript?task={own}")[1]
    board = bob.get("/board")[1]
    assert quote(request, safe="") in board  # his own review-request is linked
    found = bob.get("/search?q=review")[1]
    assert "[REVIEW REQUEST] user-auth" in found and quote(request, safe="") in found
    assert "Nothing found" in bob.get("/search?q=zebra")[1]

    # live: more mail and another run while the streams are open
    wait_until(lambda: all(s.mains for s in streams), "each stream's first page")
    project.send(
        "spec-writer-panel.gemini", "answer", "specs/*/user-auth.md", "spec-writer-panel-internal", ANSWER="tapir-late"
    )
    project.send("implementer", "question", "specs/proposed/billing.md", "spec-writer", QUESTION="yak-late")
    _run(project, "implementer", "yak-late in the log\n", "sesslateone", "late-transcript", done=False)
    late = project.send("spec-writer", "review-request", "specs/proposed/billing.md", "spec-reviewer")
    forbidden = _forbidden(project, (*secrets, "tapir-late", "yak-late", "late-transcript"))
    board_stream, runs_stream = streams[pages.index("board")], streams[pages.index("runs")]
    wait_until(lambda: any(quote(late, safe="") in m for m in board_stream.mains[1:]), "the board live")
    wait_until(lambda: any("sesslateone" in m or "running for" in m for m in runs_stream.mains[1:]), "runs live")
    for s in streams:
        s.close()
        for m in s.mains:
            assert not _leaks(m, forbidden), _leaks(m, forbidden)

    # and in Chromium, every page bob's client could open, after its live updates
    shown = [  # each page once, and each thread (the query a page ignores is crawled above)
        u
        for u in urls
        if seen[u] == 200
        and not u.startswith(("/static", "/part", "/transcript", "/login", "/charts.json", "/metrics"))  # not pages
        and ("?" not in u or u.startswith("/thread?id=") and "&" not in u)
    ]
    assert "/runs" in shown and "/board" in shown and any(u.startswith("/thread") for u in shown), shown
    with chrome() as driver:
        log_in(driver, server.url, BOB, BOB_PASSWORD)
        for url in shown:
            driver.get(server.url.rstrip("/") + url)
            wait_for(driver, lambda d: d.find_elements("id", "live"), url)
            assert not _leaks(driver.page_source, forbidden, url), (url, _leaks(driver.page_source, forbidden, url))


def _internal_mid(p: Project) -> str:
    with p.app.index() as index:
        index.refresh()
        return next(r.message_id for r in index.query(None) if r.space and r.message_id)


def test_the_owner_sees_every_run_and_its_transcript(project: Project, server: Server) -> None:
    task = _run(project, "implementer", "the implementer's own log line\n", "sessowner1", "what the agent said")
    owner = Client(server.url)
    assert owner.follow(owner_link(project)) == 303
    page = owner.get("/runs")[1]
    assert "the implementer&#39;s own log line" in page and f'href="/transcript?task={task}"' in page
    assert re.search(r"ran \d+s</span> · <span class=\"age\">ended \d+s ago", page), page
    status, text = owner.get(f"/transcript?task={task}")
    assert status == 200 and "what the agent said" in text


def test_a_transcript_link_an_agent_planted_is_not_followed(project: Project, server: Server, tmp_path: Path) -> None:
    secret = tmp_path / "owners-secret"
    secret.write_text("the owner's ssh key")
    task = _run(project, "spec-reviewer", "log\n", "sessplanted", "x")
    planted = next(project.app.config.state.cli("spec-reviewer").rglob("sessplanted.jsonl"))
    planted.unlink()
    planted.symlink_to(secret)
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, text = bob.get(f"/transcript?task={task}")
    assert status == 404 and "ssh key" not in text and "left no transcript" in text
