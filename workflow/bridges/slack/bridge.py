"""Slack bridge (seed 003): signed events in, classified tasks, workflow mail to roles, results back.

The Events API endpoint verifies every request (v0 HMAC-SHA256 of ``v0:{timestamp}:{body}`` with
the signing secret, a 5-minute window; otherwise 401 and a log line, nothing queued), answers
``url_verification``, acknowledges at once and works in the background; it ignores its own bot's
messages and retried deliveries of events it already has. A new message is classified (intents.py)
into a task in SQLite: ``pending`` when it needs a clarifying answer (asked in the thread), else
``queued``. Workers claim tasks atomically, at most ``max_concurrent`` at a time; ``running`` tasks a
crash left behind go back to ``queued`` at start. todo/todo_check/todo_complete use a local todo
list; every other intent becomes workflow mail (a question from ``user`` to the intent's role) and
runs through run-role; the result goes back to the Slack thread. Reactions show status: eyes
running, white_check_mark done, x failed, bell waiting, memo todo created, fast_forward skipped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, NamedTuple

from workflow.core.errors import ConfigError
from workflow.bridges.slack.intents import Intent, classify, failed, waiting

if TYPE_CHECKING:
    from workflow.app import App

WINDOW = 300
STATUSES = ("pending", "queued", "running", "completed", "failed", "waiting", "rejected")
SCHEMA = """
CREATE TABLE IF NOT EXISTS event(id TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS task(id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, ts TEXT NOT NULL,
  thread_ts TEXT NOT NULL, user TEXT NOT NULL, text TEXT NOT NULL, intent TEXT NOT NULL, summary TEXT NOT NULL,
  prompt TEXT NOT NULL, clarify TEXT, status TEXT NOT NULL, result TEXT NOT NULL DEFAULT '', created REAL NOT NULL,
  updated REAL NOT NULL, autonomy INTEGER NOT NULL DEFAULT 2);
CREATE INDEX IF NOT EXISTS task_thread ON task(thread_ts);
CREATE TABLE IF NOT EXISTS todo(id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,
  created REAL NOT NULL);
"""


class Settings(NamedTuple):
    signing_secret: str
    bot_token: str
    api_base_url: str = "https://slack.com/api/"
    host: str = "127.0.0.1"
    port: int = 3000
    bot_user_id: str = ""
    default_role: str = "coordinator"
    roles: dict[str, str] = {}
    artifact: str = "specs/*/slack-inbox.md"
    max_concurrent: int = 3
    backend: str = ""
    model: str = "claude-haiku-4-5-20251001"


def settings(app: App, env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ) if env is None else env
    file = str(app.config.path or "(defaults)")
    t = app.config.raw.get("bridges", {}).get("slack")
    if not isinstance(t, dict):
        raise ConfigError(f"{file}: [bridges.slack] is not configured (signing_secret_env, bot_token_env…; see the README)")
    known = ("signing_secret_env", "bot_token_env", "api_base_url", "host", "port", "bot_user_id", "default_role", "roles",
             "artifact", "max_concurrent", "backend", "model")
    for k in t:
        if k not in known:
            raise ConfigError(f"{file}: [bridges.slack] {k}: unknown key; expected one of {', '.join(known)}")
    secret = env.get(str(t.get("signing_secret_env", "SLACK_SIGNING_SECRET")), "")
    token = env.get(str(t.get("bot_token_env", "SLACK_BOT_TOKEN")), "")
    if not secret:
        raise ConfigError(f"${t.get('signing_secret_env', 'SLACK_SIGNING_SECRET')} is not set: every request must be verified")
    fields = {k: t[k] for k in ("api_base_url", "host", "port", "bot_user_id", "default_role", "roles", "artifact",
                                "max_concurrent", "backend", "model") if k in t}
    s = Settings(secret, token, **fields)
    for role in {s.default_role, *s.roles.values()}:
        app.roster.sender(role)
    return s


def signature_ok(secret: str, timestamp: str, body: bytes, signature: str, now: float | None = None) -> str | None:
    """None when the request is genuine and fresh, else why not."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return "missing or bad X-Slack-Request-Timestamp"
    if abs((now if now is not None else time.time()) - ts) > WINDOW:
        return f"timestamp {ts} is outside the {WINDOW // 60}-minute replay window"
    expected = "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not signature or not hmac.compare_digest(expected, signature):
        return "bad X-Slack-Signature"
    return None


class Store:
    def __init__(self, app: App) -> None:
        path = app.config.mail_root / ".workflow" / "slack.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()

    def seen(self, event_id: str) -> bool:
        """Record an event id; True when it was already there (a retried delivery)."""
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO event(id, at) VALUES (?, ?)", (event_id, time.time()))
        return cur.rowcount == 0

    def add(self, channel: str, ts: str, thread_ts: str, user: str, text: str, it: Intent, status: str) -> int:
        now = time.time()
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO task(channel, ts, thread_ts, user, text, intent, summary, prompt, clarify, status, created, updated) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (channel, ts, thread_ts, user, text, it.intent, it.summary, it.execution_prompt, it.clarify_question, status, now, now))
        return int(cur.lastrowid or 0)

    def get(self, task_id: int) -> dict[str, Any]:
        cur = self.db.execute("SELECT * FROM task WHERE id=?", (task_id,))
        cols = [c[0] for c in cur.description]
        row = cur.fetchone()
        return dict(zip(cols, row)) if row else {}

    def by_thread(self, thread_ts: str) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT * FROM task WHERE thread_ts=? ORDER BY id", (thread_ts,))
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def set(self, task_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.lock:
            self.db.execute(f"UPDATE task SET {cols}, updated=? WHERE id=?", (*fields.values(), time.time(), task_id))

    def claim(self, max_concurrent: int) -> int | None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                running = self.db.execute("SELECT count(*) FROM task WHERE status='running'").fetchone()[0]
                row = None if running >= max_concurrent else self.db.execute(
                    "SELECT id FROM task WHERE status='queued' ORDER BY id LIMIT 1").fetchone()
                if row is not None:
                    self.db.execute("UPDATE task SET status='running', updated=? WHERE id=? AND status='queued'", (time.time(), row[0]))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return int(row[0]) if row else None

    def recover(self) -> int:
        with self.lock:
            cur = self.db.execute("UPDATE task SET status='queued', updated=? WHERE status='running'", (time.time(),))
        return cur.rowcount

    def counts(self) -> dict[str, int]:
        return {s: n for s, n in self.db.execute("SELECT status, count(*) FROM task GROUP BY status")}


class Bridge:
    """The endpoint's state: settings, store, Slack client, the worker pool."""

    def __init__(self, app: App, s: Settings, say: Callable[[str], None]) -> None:
        from slack_sdk import WebClient
        from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

        self.app, self.s, self.say = app, s, say
        self.store = Store(app)
        self.client = WebClient(token=s.bot_token, base_url=s.api_base_url,
                                retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=3)])
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.active: set[int] = set()

    # -- Slack calls (failures are logged, never fatal)

    def api(self, method: str, **kw: Any) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            getattr(self.client, method)(**kw)
        except (SlackApiError, OSError) as e:
            self.say(f"slack {method} failed: {e}")

    def react(self, t: dict[str, Any], name: str, remove: str | None = None) -> None:
        if remove:
            self.api("reactions_remove", channel=t["channel"], timestamp=t["ts"], name=remove)
        self.api("reactions_add", channel=t["channel"], timestamp=t["ts"], name=name)

    def post(self, t: dict[str, Any], text: str) -> None:
        self.api("chat_postMessage", channel=t["channel"], thread_ts=t["thread_ts"], text=text)

    # -- events

    def handle(self, payload: dict[str, Any]) -> None:
        ev = payload.get("event") or {}
        kind = ev.get("type")
        if kind == "message":
            if ev.get("bot_id") or ev.get("subtype") or (self.s.bot_user_id and ev.get("user") == self.s.bot_user_id):
                return
            self.message(ev)
        elif kind == "reaction_added" and ev.get("reaction") in ("-1", "thumbsdown"):
            ts = (ev.get("item") or {}).get("ts", "")
            for t in self.store.by_thread(ts):
                if t["ts"] == ts and t["status"] in ("pending", "queued", "waiting"):
                    self.post(t, "Rejected: I will not run this.")
                    self.store.set(t["id"], status="rejected")
                    self.say(f"task {t['id']} rejected by a thumbs-down")

    def message(self, ev: dict[str, Any]) -> None:
        channel, ts, text, user = ev.get("channel", ""), ev.get("ts", ""), ev.get("text", ""), ev.get("user", "")
        thread = ev.get("thread_ts") or ts
        if thread != ts:
            earlier = self.store.by_thread(thread)
            if earlier:
                last = earlier[-1]
                if last["status"] == "pending":
                    self.store.set(last["id"], prompt=f"{last['prompt']}\n\nThe user adds: {text}", status="queued")
                    self.say(f"task {last['id']}: clarified, queued")
                    self.wake.set()
                    return
                if last["status"] in ("completed", "failed", "waiting"):
                    history = "\n".join(f"Request: {t['text']}\nResult: {t['result'][-1500:]}" for t in earlier)
                    it = classify(text, self.s.model)
                    it = it._replace(execution_prompt=f"Earlier in this thread:\n{history}\n\nFollow-up: {text}", clarify_question=None)
                    tid = self.store.add(channel, ts, thread, user, text, it, "queued")
                    self.say(f"task {tid}: follow-up in thread {thread}")
                    self.wake.set()
                    return
        if not text.strip():
            self.api("reactions_add", channel=channel, timestamp=ts, name="fast_forward")  # nothing to do: skipped
            self.say(f"message {ts} has no text; skipped")
            return
        it = classify(text, self.s.model)
        status = "pending" if it.clarify_question else "queued"
        if status == "pending":  # ask in the thread first: whoever sees the task pending sees the question asked
            where = {"channel": channel, "ts": ts, "thread_ts": thread}
            self.react(where, "bell")
            self.post(where, str(it.clarify_question))
        tid = self.store.add(channel, ts, thread, user, text, it, status)
        self.say(f"task {tid}: {it.intent} ({it.method}) {status}: {it.summary}")
        self.wake.set()

    # -- work

    def work_once(self) -> bool:
        """Start what may start; True when something was started."""
        tid = self.store.claim(self.s.max_concurrent)
        if tid is None:
            return False
        self.active.add(tid)
        threading.Thread(target=self.execute, args=(tid,), daemon=True, name=f"slack-task-{tid}").start()
        return True

    def execute(self, tid: int) -> None:
        t = self.store.get(tid)
        try:
            self.react(t, "eyes")
            if t["intent"] in ("todo", "todo_check", "todo_complete"):
                self.todo(t)
                return
            self.run_role(t)
        except Exception as e:  # a task failure must not take the bridge down
            self.react(t, "x", remove="eyes")
            self.post(t, f"Failed: {e}")
            self.store.set(tid, status="failed", result=f"internal error: {e}")
        finally:
            self.active.discard(tid)
            self.wake.set()

    def todo(self, t: dict[str, Any]) -> None:
        db = self.store.db
        if t["intent"] == "todo":
            text = t["text"]
            for prefix in ("todo:", "add todo", "add to my todo", "todo追加", "todoに追加"):
                i = text.lower().find(prefix)
                if i >= 0:
                    text = text[i + len(prefix):]
            text = text.strip(" :：") or t["text"]
            with self.store.lock:
                db.execute("INSERT INTO todo(text, created) VALUES (?, ?)", (text, time.time()))
            result = f"Added to the todo list: {text}"
            self.react(t, "memo", remove="eyes")
        elif t["intent"] == "todo_check":
            rows = db.execute("SELECT id, text FROM todo WHERE done=0 ORDER BY id").fetchall()
            result = "Todo:\n" + ("\n".join(f"{i}. {x}" for i, x in rows) or "(empty)")
            self.react(t, "white_check_mark", remove="eyes")
        else:
            import re

            m = re.search(r"(\d+)", t["text"])
            if m:
                with self.store.lock:
                    cur = db.execute("UPDATE todo SET done=1 WHERE id=? AND done=0", (int(m.group(1)),))
                result = f"Done: todo {m.group(1)}" if cur.rowcount else f"No open todo {m.group(1)}"
            else:
                result = "Which todo? Give its number (todo一覧 / list todos shows them)."
            self.react(t, "white_check_mark", remove="eyes")
        self.post(t, result)
        self.store.set(t["id"], status="completed", result=result)

    def run_role(self, t: dict[str, Any]) -> None:
        from workflow.delivery.notify import NotifyRequest, compose
        from workflow.agents.runrole import run_role
        from workflow.delivery.transport import make_transport

        app = self.app
        role = self.s.roles.get(t["intent"], self.s.default_role)
        transport = make_transport(app.config, app.deliverer)
        req = NotifyRequest("question", (self.s.artifact,), (role,), app.config.default_sender, None,
                            {"QUESTION": t["prompt"], "CONTEXT": f"From Slack ({t['intent']}): {t['summary']}"})
        with app.index() as index:
            c = compose(req, app.config, app.roster, index)
        transport.send(c.raw, c.sender_address, c.recipients)
        lines: list[str] = []
        outcome = run_role(app, role, transport=transport, echo=lines.append, backend=self.s.backend or None)
        if outcome.busy:
            self.store.set(t["id"], status="queued")
            self.say(f"task {t['id']}: {role} is busy; queued again")
            time.sleep(1.0)
            return
        res = outcome.result
        output = (res.summary if res else "\n".join(lines)) or "\n".join(lines)
        # Slack first, then the status: whoever watches the status sees the thread already answered.
        if res is None or not res.ok or failed(output):
            why = res.error if res is not None and not res.ok else output[-500:]
            self.react(t, "x", remove="eyes")
            self.post(t, f"Failed ({role}): {why}")
            self.store.set(t["id"], status="failed", result=output or why)
        elif waiting(output):
            self.react(t, "bell", remove="eyes")
            self.post(t, output)
            self.store.set(t["id"], status="waiting", result=output)
        else:
            self.react(t, "white_check_mark", remove="eyes")
            self.post(t, output)
            self.store.set(t["id"], status="completed", result=output)

    def handle_queued(self) -> None:
        """Handle every event the endpoint has queued."""
        while True:
            try:
                payload = self.events.get_nowait()
            except queue.Empty:
                return
            if payload is not None:
                self.handle(payload)

    def loop(self) -> None:
        """Dispatch queued work until stopping, and process queued events."""
        while not self.stopping.is_set():
            self.handle_queued()
            while self.work_once():
                pass
            self.wake.wait(0.5)
            self.wake.clear()

    def drain(self, timeout: float = 300.0) -> None:
        """Handle every queued event and run until no task is queued or running (replay, tests)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.handle_queued()
            started = self.work_once()
            c = self.store.counts()
            if not started and not self.active and not c.get("queued") and not c.get("running"):
                return
            time.sleep(0.05)


def make_handler(bridge: Bridge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: bytes = b"", ctype: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length > 1 << 20:
                self._reply(413, b"too large")
                return
            body = self.rfile.read(length)
            why = signature_ok(bridge.s.signing_secret, self.headers.get("X-Slack-Request-Timestamp", ""), body,
                               self.headers.get("X-Slack-Signature", ""))
            if why:
                bridge.say(f"refused a request from {self.client_address[0]}: {why}")
                self._reply(401, why.encode())
                return
            try:
                payload = json.loads(body)
            except ValueError:
                self._reply(400, b"not JSON")
                return
            if payload.get("type") == "url_verification":
                self._reply(200, json.dumps({"challenge": payload.get("challenge", "")}).encode(), "application/json")
                return
            event_id = str(payload.get("event_id") or "")
            if event_id and bridge.store.seen(event_id):
                retry = self.headers.get("X-Slack-Retry-Num")
                bridge.say(f"event {event_id} already received" + (f" (retry {retry})" if retry else "") + "; ignored")
                self._reply(200, b"ok")
                return
            bridge.events.put(payload)
            bridge.wake.set()
            self._reply(200, b"ok")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def serve(bridge: Bridge, ready: Callable[[int], None]) -> None:
    recovered = bridge.store.recover()
    if recovered:
        bridge.say(f"{recovered} task(s) left running by a crash are queued again")
    server = ThreadingHTTPServer((bridge.s.host, bridge.s.port), make_handler(bridge))
    threading.Thread(target=server.serve_forever, daemon=True, name="slack-http").start()
    ready(server.server_address[1])
    try:
        bridge.loop()
    finally:
        server.shutdown()
        server.server_close()


def replay(bridge: Bridge, path: str) -> int:
    """Feed recorded payloads (a JSON array, or one JSON object per line) through the same path."""
    text = open(path, encoding="utf-8").read().strip()
    payloads = json.loads(text) if text.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    bridge.store.recover()
    n = 0
    for p in payloads:
        event_id = str(p.get("event_id") or "")
        if event_id and bridge.store.seen(event_id):
            continue
        bridge.events.put(p)
        n += 1
    bridge.drain()
    return n
