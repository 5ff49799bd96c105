"""Slack bridge: Slack requests in as workflow mail; the roles' answers back to their threads.

A new message is classified (``intents``) into a task (``store``): ``pending`` when it needs a
clarifying answer (asked in the thread; the user's reply queues it; a thumbs-down rejects it),
else ``queued``. todo / todo_check / todo_complete are answered at once from a local todo list
(``todos``). Every other intent becomes a ``question`` mail to the intent's role, From the
thread's own address (``slack+<channel>-<thread_ts>@``): agentd runs the role as for any mail,
on that thread's mail alone, with ``[agentd]``'s timeouts, retries and budgets. The answer — or,
once agentd gives up, its blocker-report — arrives in the bridge's mailbox (``bridges.answers``),
and the loop posts it to the thread as Block Kit (``report``) with its reaction. A follow-up in
a finished thread is a new question from the same address: the role's agent session for the
thread goes on (``agents.asked``), and the question carries the earlier exchange for when it
cannot. Only the configured channel is watched (``watching``). Reactions show status: eyes
asked, white_check_mark done, x failed, bell waiting, memo todo created, fast_forward skipped.
Each side effect is recorded before it is done (``store``), so nothing is sent or posted twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from workflow.agents import spend
from workflow.app import App
from workflow.bridges import answers
from workflow.bridges.slack import report, todos
from workflow.bridges.slack.intents import Intent, by_keywords, classify, failed, waiting
from workflow.bridges.slack.settings import SlackConfig
from workflow.bridges.slack.store import OPEN, SlackStore, SlackTask, Status, Where
from workflow.bridges.slack.todos import TODO_INTENTS
from workflow.core.errors import ConfigError
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.policy.roster import BRIDGE_TAG

NAME = "slack"
CLASSIFIER = "slack-classifier"  # the account the classifier's tokens are booked against
POLL = 0.25  # seconds between looks at the bridge's mailbox when nothing else wakes the loop


class SlackKeys(NamedTuple):
    """The secrets the bridge runs with, read from the environment variables the config names."""

    signing_secret: str
    bot_token: str
    app_token: str = ""  # Socket Mode


def configured(
    app: App, env: Mapping[str, str] | None = None, mode: str | None = None, receiving: bool = True
) -> tuple[SlackConfig, SlackKeys]:
    """``[bridges.slack]`` (its ``mode`` overridden when given) and its secrets; refuses when a
    role is unknown or agentd would not run it, or (``receiving``: not a replay) the mode's secret
    is missing."""
    env = os.environ if env is None else env
    s = app.config.section(SlackConfig)
    if s is None:
        raise ConfigError(
            f"{app.config.file}: [bridges.slack] is not configured (signing_secret_env, bot_token_env…; see docs/bridges.md)"
        )
    if mode is not None:
        s = s._replace(mode=mode)
    watched = app.config.agentd.roles
    for role in {s.default_role, *s.roles.values()}:
        app.roster.sender(role)
        if watched and role not in watched:
            raise ConfigError(
                f"{app.config.file}: [bridges.slack] asks {role}, which [agentd] roles does not list, "
                f"so nothing would answer; add it there ({', '.join(watched)})"
            )
    keys = SlackKeys(env.get(s.signing_secret_env, ""), env.get(s.bot_token_env, ""), env.get(s.app_token_env, ""))
    if receiving and s.mode == "socket" and not keys.app_token:
        raise ConfigError(f"${s.app_token_env} is not set: Socket Mode needs the app-level token (xapp-…)")
    if receiving and (s.mode == "http" or (s.mode == "auto" and not keys.app_token)) and not keys.signing_secret:
        raise ConfigError(
            f"${s.signing_secret_env} is not set: every HTTP request must be verified "
            f"(or set ${s.app_token_env} for Socket Mode)"
        )
    return s, keys


def thread_address(where: Where) -> str:
    """The bridge address of a Slack thread (its local part): ``slack+c1-100-1``."""
    tag = re.sub(r"[^a-z0-9-]+", "-", f"{where.channel}-{where.thread_ts}".lower()).strip("-")[:48]
    if not BRIDGE_TAG.match(tag):  # no channel or ts of Slack's shape: a name of the same thread all the same
        tag = hashlib.sha256(f"{where.channel}\0{where.thread_ts}".encode()).hexdigest()[:16]
    return f"{NAME}+{tag}"


class Bridge:
    """The bridge's state: config, store, Slack client, the events the receiver queued."""

    def __init__(self, app: App, s: SlackConfig, keys: SlackKeys, say: Callable[[str], None]) -> None:
        # lazy: start-up time (slack_sdk costs ~85 ms); only the bridge talks to Slack
        from slack_sdk import WebClient
        from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

        self.app, self.s, self.keys, self.say = app, s, keys, say
        self.store = SlackStore(app.config.state.slack)
        self.client = WebClient(
            token=keys.bot_token,
            base_url=s.api_base_url,
            retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=3)],
        )
        self.transport = make_transport(app.config, app.deliverer)
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.channel_names: dict[str, str] = {}  # channel id → name, as conversations.info said

    # -- Slack calls (failures are logged, never fatal)

    def api(self, method: str, **kw: Any) -> None:
        from slack_sdk.errors import SlackApiError  # lazy: with the client above

        try:
            getattr(self.client, method)(**kw)
        except (SlackApiError, OSError) as e:
            self.say(f"slack {method} failed: {e}")

    def react(self, where: Where, name: str) -> None:
        self.api("reactions_add", channel=where.channel, timestamp=where.ts, name=name)

    def post(self, where: Where, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """A message in the request's thread: Block Kit when given, ``text`` its plain fallback."""
        extra: dict[str, Any] = {"blocks": blocks} if blocks else {}
        self.api("chat_postMessage", channel=where.channel, thread_ts=where.thread_ts, text=text, **extra)

    def mark(self, t: SlackTask, name: str, remove: str | None = None) -> None:
        """A task's status reaction, put once however often its answer is handed over."""
        if remove and self.store.record(t.id, "unreact", remove):
            self.api("reactions_remove", channel=t.channel, timestamp=t.ts, name=remove)
        if self.store.record(t.id, "react", name):
            self.api("reactions_add", channel=t.channel, timestamp=t.ts, name=name)

    def tell(self, t: SlackTask, what: str, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """Post ``what`` (a step's name: "result") to the task's thread once."""
        if self.store.record(t.id, "post", what):
            self.post(t.where, text, blocks)

    def role_for(self, intent: str) -> str:
        """The role a task of this intent asks ("" for the todo intents, which ask none)."""
        return "" if intent in TODO_INTENTS else self.s.roles.get(intent, self.s.default_role)

    # -- events

    def classify(self, text: str) -> Intent:
        """The request's intent; the model's tokens are booked against ``slack-classifier``'s budget."""
        why = spend.spent(self.app, CLASSIFIER)
        if why:
            return by_keywords(text, why)
        it = classify(text, self.s.model)
        spend.book(self.app, CLASSIFIER, it.usage)
        return it

    def receive(self, payload: dict[str, Any], retry: str | None = None) -> bool:
        """An event from Slack (Socket Mode, HTTP, a replay): queued for the loop unless it is a
        retry of one already received. True when queued."""
        event_id = str(payload.get("event_id") or "")
        if event_id and self.store.seen(event_id):
            self.say(f"event {event_id} already received" + (f" (retry {retry})" if retry else "") + "; ignored")
            return False
        self.events.put(payload)
        self.wake.set()
        return True

    def watching(self, channel: str) -> bool:
        """Whether events from this channel id are ours: every channel unless ``channel`` is set
        (an id, or a name resolved once through conversations.info)."""
        want = self.s.channel
        if not want or channel == want:
            return True
        if not want.startswith("#") and want[:1] in "CGD" and want.isupper():
            return False  # an id, and not this one
        if channel not in self.channel_names:
            from slack_sdk.errors import SlackApiError  # lazy: with the client (start-up time)

            try:
                info = self.client.conversations_info(channel=channel)
                self.channel_names[channel] = str((info.get("channel") or {}).get("name") or "")
            except (SlackApiError, OSError) as e:
                self.say(f"slack conversations.info {channel} failed: {e}; its events are ignored for now")
                return False
        return self.channel_names[channel] == want.lstrip("#")

    def handle(self, payload: dict[str, Any]) -> None:
        ev = payload.get("event")
        if not isinstance(ev, dict):
            self.say(f"event {payload.get('event_id', '?')} has no event object; ignored")
            return
        kind = ev.get("type")
        channel = ev.get("channel") if kind == "message" else (ev.get("item") or {}).get("channel")
        if kind in ("message", "reaction_added") and not self.watching(str(channel or "")):
            return
        if kind == "message":
            if ev.get("bot_id") or ev.get("subtype") or (self.s.bot_user_id and ev.get("user") == self.s.bot_user_id):
                return
            self.message(ev)
        elif kind == "reaction_added" and ev.get("reaction") in ("-1", "thumbsdown"):
            ts = (ev.get("item") or {}).get("ts", "")
            for t in self.store.by_thread(ts):
                if t.ts == ts and t.status in OPEN:
                    self.post(t.where, "Rejected: I will not run this.")
                    self.store.set(t.id, status=Status.REJECTED)
                    self.say(f"task {t.id} rejected by a thumbs-down")

    def message(self, ev: dict[str, Any]) -> None:
        text, user = ev.get("text", ""), ev.get("user", "")
        ts = ev.get("ts", "")
        where = Where(ev.get("channel", ""), ts, ev.get("thread_ts") or ts)
        if where.thread_ts != ts and self.follow_up(where, user, text):
            return
        if not text.strip():
            self.react(where, "fast_forward")  # nothing to do: skipped
            self.say(f"message {ts} has no text; skipped")
            return
        it = self.classify(text)
        status = Status.PENDING if it.clarify_question else Status.QUEUED
        role = self.role_for(it.intent)
        if status == Status.PENDING:  # ask in the thread first: whoever sees the task pending sees the question
            self.react(where, "bell")
        if it.intent not in TODO_INTENTS:  # how it was understood (todo intents answer at once)
            self.post(where, *report.classification(it.summary, it.intent, str(status), role, it.clarify_question))
        tid = self.store.add(where, user, text, it, status, role)
        self.say(f"task {tid}: {it.intent} ({it.method}) {status}: {it.summary}")
        if status == Status.PENDING:
            self.store.record(tid, "react", "bell")
        elif it.intent in TODO_INTENTS:
            self.todo(tid)
        else:
            self.ask(tid)

    def follow_up(self, where: Where, user: str, text: str) -> bool:
        """A reply in a thread the bridge knows: a clarification of its pending task, or a follow-up
        of a finished one (asked of the same role, with the earlier exchange). False: neither."""
        earlier = self.store.by_thread(where.thread_ts)
        if not earlier:
            return False
        last = earlier[-1]
        if last.status == Status.PENDING:
            self.store.set(last.id, prompt=f"{last.prompt}\n\nThe user adds: {text}", status=Status.QUEUED)
            self.say(f"task {last.id}: clarified, queued")
            self.ask(last.id)
            return True
        if last.status not in (Status.COMPLETED, Status.FAILED, Status.WAITING):
            return False
        history = "\n".join(f"Request: {t.text}\nResult: {t.result[-1500:]}" for t in earlier)
        it = self.classify(text)
        it = it._replace(
            execution_prompt=f"Earlier in this thread:\n{history}\n\nFollow-up: {text}", clarify_question=None
        )
        role = next((t.role for t in reversed(earlier) if t.role), "") or self.role_for(it.intent)
        if it.intent in TODO_INTENTS:
            role = ""
        tid = self.store.add(where, user, text, it, Status.QUEUED, role)
        self.say(f"task {tid}: follow-up in thread {where.thread_ts}")
        if role:
            self.ask(tid)
        else:
            self.todo(tid)
        return True

    # -- work

    def todo(self, tid: int) -> None:
        t = self.store.get(tid)
        assert t is not None
        self.mark(t, "eyes")
        result, reaction = todos.handle(self.store, t.intent, t.text)
        self.mark(t, reaction, remove="eyes")
        self.tell(t, "result", result)
        self.store.set(t.id, status=Status.COMPLETED, result=result)

    def question(self, t: SlackTask) -> tuple[str, bytes, str, tuple[str, ...]]:
        """The task's question mail to its role: composed and recorded the first time, the same
        bytes after a crash (sending them again is harmless: a Message-ID is stored once)."""
        recorded = self.store.done(t.id, "question")
        if recorded:
            d = json.loads(recorded[0])
            return str(d["mid"]), base64.b64decode(d["raw"]), str(d["sender"]), tuple(d["to"])
        req = NotifyRequest(
            "question",
            (self.s.artifact,),
            (t.role,),
            thread_address(t.where),
            None,
            {"QUESTION": t.prompt, "CONTEXT": f"From Slack ({t.intent}): {t.summary}"},
        )
        c = self.app.compose(req)
        d = {"mid": c.message_id, "raw": base64.b64encode(c.raw).decode(), "sender": c.sender_address}
        self.store.record(t.id, "question", json.dumps({**d, "to": list(c.recipients)}))
        return c.message_id, c.raw, c.sender_address, c.recipients

    def ask(self, tid: int) -> None:
        """Send the task's question to its role (agentd runs it); once, across crashes."""
        t = self.store.get(tid)
        assert t is not None
        mid, raw, sender, to = self.question(t)
        self.store.set(t.id, asked=mid)
        self.transport.send(raw, sender, to)
        self.store.record(t.id, "sent", mid)
        self.mark(t, "eyes")
        self.say(f"task {t.id}: asked {t.role} ({mid}) from {sender}")

    def resend(self) -> int:
        """Send again the questions a crash left recorded but not sent; how many."""
        n = 0
        for t in self.store.in_status(Status.QUEUED):
            if t.role and self.store.done(t.id, "question") and not self.store.done(t.id, "sent"):
                self.ask(t.id)
                n += 1
        return n

    def answered(self) -> int:
        """Post every answer waiting in the bridge's mailbox to its thread; how many."""
        n = 0
        for a in answers.waiting(self.app, NAME):
            t = self.store.by_question(a.in_reply_to) if a.in_reply_to else None
            if t is None:
                self.say(
                    f"{a.event or 'mail'} from {a.sender} answers no task ({a.in_reply_to or 'no In-Reply-To'}); read"
                )
            elif t.status != Status.QUEUED:
                self.say(f"task {t.id} is {t.status}: the {a.event} from {a.sender} is not posted")
            else:
                self.finish(t, a)
                n += 1
            answers.done(self.app, a)
        return n

    def finish(self, t: SlackTask, a: answers.Answer) -> None:
        """A task's answer, posted to its thread: failed, waiting (it asks back) or completed."""
        output, role = a.text, t.role
        if a.session:
            self.store.set(t.id, session=a.session, resume=a.resumed)
        if a.failed or failed(output):
            status, reaction, why = Status.FAILED, "x", output[-500:]
        elif waiting(output):
            status, reaction, why = Status.WAITING, "bell", output
        else:
            status, reaction, why = Status.COMPLETED, "white_check_mark", output
        # Slack first, then the status: whoever watches the status sees the thread already answered.
        self.mark(t, reaction, remove="eyes")
        self.tell(t, "result", *report.result(t.summary, t.intent, str(status), why, role))
        self.store.set(t.id, status=status, result=output)
        for other in self.store.by_thread(t.thread_ts):  # asked before and answered together (one run)
            if other.id < t.id and other.status == Status.QUEUED and other.role == role:
                self.mark(other, reaction, remove="eyes")
                self.store.set(other.id, status=status, result=f"answered with task {t.id}")
        resumed = f", resuming session {a.resumed}" if a.resumed else ""
        self.say(f"task {t.id}: {status} by {a.sender}" + (f" in session {a.session}{resumed}" if a.session else ""))

    def handle_queued(self) -> None:
        """Handle every event the receiver has queued."""
        while True:
            try:
                payload = self.events.get_nowait()
            except queue.Empty:
                return
            if payload is None:
                continue
            try:
                self.handle(payload)
            except Exception as e:  # an event of a shape nobody expected: one line, and the bridge goes on
                self.say(f"event {payload.get('event_id', '?')} not handled: {type(e).__name__}: {e}")

    def start(self) -> None:
        """What a crash left half done: questions recorded but not sent."""
        n = self.resend()
        if n:
            self.say(f"{n} question(s) a crash left unsent are sent again")

    def loop(self) -> None:
        """Handle queued events and post the answers that came, until stopping."""
        self.start()
        while not self.stopping.is_set():
            self.handle_queued()
            self.answered()
            self.wake.wait(POLL)
            self.wake.clear()

    def drain(self) -> None:
        """Handle every queued event and post the answers already here (replay, tests); the
        questions it asks are answered later, by agentd, and posted by the next run of the bridge."""
        self.start()
        self.handle_queued()
        self.answered()
