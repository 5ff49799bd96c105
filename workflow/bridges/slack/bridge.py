"""Slack bridge: Slack requests become classified tasks; tasks run as workflow mail; results go back.

A new message is classified (``intents``) into a task (``queue``): ``pending`` when it needs a
clarifying answer (asked in the thread; the user's reply queues it; a thumbs-down rejects it),
else ``queued``. Workers claim tasks, at most ``max_concurrent`` at once. todo / todo_check /
todo_complete use a local todo list; every other intent becomes a ``question`` from the default
sender to the intent's role and runs through run-role within the intent's timeout; the
classification and the result go back to the thread as Block Kit (``report``). A reply in a
finished task's thread resumes the task's agent session when the backend can, else runs anew with
the earlier exchange as context. Only the configured channel is watched (``watching``).
Reactions show status: eyes running, white_check_mark done, x failed, bell waiting, memo todo
created, fast_forward skipped. Web API calls go through slack_sdk's WebClient (429s honoured).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from workflow.agentd import bridged
from workflow.agentd.tasks import TaskStatus
from workflow.agents.runrole import Outcome, run_role
from workflow.app import App
from workflow.bridges.slack import report, todos
from workflow.bridges.slack.intents import INTENTS, Intent, by_keywords, classify, failed, waiting
from workflow.bridges.slack.queue import SlackTask, TaskQueue, Where
from workflow.bridges.slack.settings import SlackConfig
from workflow.bridges.slack.todos import TODO_INTENTS
from workflow.core.errors import ConfigError
from workflow.core.schema import suggest
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport

CLASSIFIER = "slack-classifier"  # the account the classifier's tokens are booked against
OPEN = (TaskStatus.PENDING, TaskStatus.QUEUED, TaskStatus.WAITING)


class SlackKeys(NamedTuple):
    """The secrets the bridge runs with, read from the environment variables the config names."""

    signing_secret: str
    bot_token: str
    app_token: str = ""  # Socket Mode


def configured(
    app: App, env: Mapping[str, str] | None = None, mode: str | None = None, receiving: bool = True
) -> tuple[SlackConfig, SlackKeys]:
    """``[bridges.slack]`` (its ``mode`` overridden when given) and its secrets; refuses when a
    role or an intent is unknown, or (``receiving``: not a replay) the mode's secret is missing."""
    env = os.environ if env is None else env
    s = app.config.section(SlackConfig)
    if s is None:
        raise ConfigError(
            f"{app.config.file}: [bridges.slack] is not configured (signing_secret_env, bot_token_env…; see docs/bridges.md)"
        )
    if mode is not None:
        s = s._replace(mode=mode)
    for role in {s.default_role, *s.roles.values()}:
        app.roster.sender(role)
    for intent in s.timeouts:
        if intent not in INTENTS:
            raise ConfigError(
                f"{app.config.file}: [bridges.slack] timeouts: unknown intent {intent!r}{suggest(intent, list(INTENTS))}; "
                f"intents: {', '.join(INTENTS)}"
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


class Bridge:
    """The bridge's state: config, queue, Slack client, the worker threads."""

    def __init__(self, app: App, s: SlackConfig, keys: SlackKeys, say: Callable[[str], None]) -> None:
        # lazy: start-up time (slack_sdk costs ~85 ms); only the bridge talks to Slack
        from slack_sdk import WebClient
        from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

        self.app, self.s, self.keys, self.say = app, s, keys, say
        self.store = TaskQueue(app.config.state.slack)
        self.client = WebClient(
            token=keys.bot_token,
            base_url=s.api_base_url,
            retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=3)],
        )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.active: set[int] = set()
        self.channel_names: dict[str, str] = {}  # channel id → name, as conversations.info said

    # -- Slack calls (failures are logged, never fatal)

    def api(self, method: str, **kw: Any) -> None:
        from slack_sdk.errors import SlackApiError  # lazy: with the client above

        try:
            getattr(self.client, method)(**kw)
        except (SlackApiError, OSError) as e:
            self.say(f"slack {method} failed: {e}")

    def react(self, where: Where, name: str, remove: str | None = None) -> None:
        if remove:
            self.api("reactions_remove", channel=where.channel, timestamp=where.ts, name=remove)
        self.api("reactions_add", channel=where.channel, timestamp=where.ts, name=name)

    def post(self, where: Where, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """A message in the request's thread: Block Kit when given, ``text`` its plain fallback."""
        extra: dict[str, Any] = {"blocks": blocks} if blocks else {}
        self.api("chat_postMessage", channel=where.channel, thread_ts=where.thread_ts, text=text, **extra)

    def mark(self, t: SlackTask, name: str, remove: str | None = None) -> None:
        """A task's status reaction, put once however often the task is retried or recovered."""
        if remove and self.store.record(t.id, "unreact", remove):
            self.api("reactions_remove", channel=t.channel, timestamp=t.ts, name=remove)
        if self.store.record(t.id, "react", name):
            self.api("reactions_add", channel=t.channel, timestamp=t.ts, name=name)

    def role_for(self, intent: str) -> str:
        """The role a task of this intent runs as ("" for the todo intents, which run none)."""
        return "" if intent in TODO_INTENTS else self.s.roles.get(intent, self.s.default_role)

    # -- events

    def classify(self, text: str) -> Intent:
        """The request's intent; the model's tokens are booked against ``slack-classifier``'s budget."""
        why = bridged.spent(self.app, CLASSIFIER)
        if why:
            return by_keywords(text, why)
        it = classify(text, self.s.model)
        bridged.book(self.app, CLASSIFIER, it.usage)
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
                    self.store.set(t.id, status=TaskStatus.REJECTED)
                    self.say(f"task {t.id} rejected by a thumbs-down")

    def message(self, ev: dict[str, Any]) -> None:
        text, user = ev.get("text", ""), ev.get("user", "")
        ts = ev.get("ts", "")
        where = Where(ev.get("channel", ""), ts, ev.get("thread_ts") or ts)
        if where.thread_ts != ts:
            earlier = self.store.by_thread(where.thread_ts)
            if earlier:
                last = earlier[-1]
                if last.status == TaskStatus.PENDING:
                    self.store.set(last.id, prompt=f"{last.prompt}\n\nThe user adds: {text}", status=TaskStatus.QUEUED)
                    self.say(f"task {last.id}: clarified, queued")
                    self.wake.set()
                    return
                if last.status in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.WAITING):
                    history = "\n".join(f"Request: {t.text}\nResult: {t.result[-1500:]}" for t in earlier)
                    it = self.classify(text)
                    it = it._replace(
                        execution_prompt=f"Earlier in this thread:\n{history}\n\nFollow-up: {text}",
                        clarify_question=None,
                    )
                    resume = next((t.session for t in reversed(earlier) if t.session), "")
                    role = next((t.role for t in reversed(earlier) if t.session), "") or self.role_for(it.intent)
                    tid = self.store.add(where, user, text, it, TaskStatus.QUEUED, role, resume=resume)
                    self.say(
                        f"task {tid}: follow-up in thread {where.thread_ts}"
                        + (f", resuming session {resume}" if resume else "")
                    )
                    self.wake.set()
                    return
        if not text.strip():
            self.react(where, "fast_forward")  # nothing to do: skipped
            self.say(f"message {ts} has no text; skipped")
            return
        it = self.classify(text)
        status = TaskStatus.PENDING if it.clarify_question else TaskStatus.QUEUED
        role = self.role_for(it.intent)
        if status == TaskStatus.PENDING:  # ask in the thread first: whoever sees the task pending sees the question
            self.react(where, "bell")
        if it.intent not in TODO_INTENTS:  # how it was understood (todo intents answer at once)
            self.post(where, *report.classification(it.summary, it.intent, str(status), role, it.clarify_question))
        tid = self.store.add(where, user, text, it, status, role)
        if status == TaskStatus.PENDING:
            self.store.record(tid, "react", "bell")
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
            if t is None:
                return
            self.mark(t, "eyes")
            if t.intent in TODO_INTENTS:
                self.todo(t)
                return
            self.run_role(t)
        except Exception as e:
            if t is not None:
                self.mark(t, "x", remove="eyes")
                self.post(t.where, f"Failed: {e}")
            self.store.set(tid, status=TaskStatus.FAILED, result=f"internal error: {e}")
        finally:
            self.active.discard(tid)
            self.wake.set()

    def todo(self, t: SlackTask) -> None:
        result, reaction = todos.handle(self.store, t.intent, t.text)
        self.mark(t, reaction, remove="eyes")
        self.post(t.where, result)
        self.store.set(t.id, status=TaskStatus.COMPLETED, result=result)

    def question(
        self, t: SlackTask, role: str, kind: str = "mail", text: str | None = None
    ) -> tuple[str, bytes, str, tuple[str, ...]]:
        """The task's question mail to its role (``text``, default its prompt): composed and recorded
        the first time (as step ``kind``), the same bytes after a retry or a crash (sending them
        again is harmless: a Message-ID is stored once)."""
        recorded = self.store.done(t.id, kind)
        if recorded:
            d = json.loads(recorded[0])
            return str(d["mid"]), base64.b64decode(d["raw"]), str(d["sender"]), tuple(d["to"])
        req = NotifyRequest(
            "question",
            (self.s.artifact,),
            (role,),
            self.app.config.default_sender,
            None,
            {"QUESTION": t.prompt if text is None else text, "CONTEXT": f"From Slack ({t.intent}): {t.summary}"},
        )
        c = self.app.compose(req)
        self.store.record(
            t.id,
            kind,
            json.dumps(
                {
                    "mid": c.message_id,
                    "raw": base64.b64encode(c.raw).decode(),
                    "sender": c.sender_address,
                    "to": list(c.recipients),
                }
            ),
        )
        return c.message_id, c.raw, c.sender_address, c.recipients

    def timeout_for(self, intent: str) -> float | None:
        """How long a task of this intent may run: ``timeouts[intent]``, else ``timeout``, else
        (None) the role's own run timeout."""
        return self.s.timeouts.get(intent) or self.s.timeout or None

    def attempt(self, t: SlackTask, role: str, kind: str, text: str | None, session: str) -> tuple[Outcome, str]:
        """One run of the task's role on its question (``kind``: which recorded question mail)."""
        transport = make_transport(self.app.config, self.app.deliverer)
        mid, raw, sender, to = self.question(t, role, kind, text)
        lines: list[str] = []

        def go() -> Outcome:  # sent once the run is on agentd's books: agentd never wakes the role for it
            transport.send(raw, sender, to)
            return run_role(
                self.app,
                role,
                transport=transport,
                echo=lines.append,
                backend=self.s.backend or None,
                only=[mid],  # this task's question, not the role's other mail
                timeout=self.timeout_for(t.intent),
                session=session,
            )

        done = bridged.run(
            self.app,
            "slack",
            str(t.id),
            role,
            go,
            mids=[mid],
            say=lambda line: self.say(f"task {t.id}: {line}"),
        )
        outcome = done.outcome or Outcome(None, (), (), busy=done.waits)  # paused or running: it waits
        return outcome, "\n".join(lines)

    def run_role(self, t: SlackTask) -> None:
        role = t.role or self.role_for(t.intent)
        if t.resume:  # a follow-up: the earlier session goes on with just the new message
            outcome, log = self.attempt(t, role, "mail-resume", t.text, t.resume)
            res = outcome.result
            if not outcome.busy and (res is None or not res.ok):
                why = res.error if res is not None else "nothing ran"
                self.say(
                    f"task {t.id}: resuming session {t.resume} failed ({why}); a new run with the earlier exchange"
                )
                outcome, log = self.attempt(t, role, "mail", None, "")
        else:
            outcome, log = self.attempt(t, role, "mail", None, "")
        if outcome.busy:  # another run holds the role: wait, quietly (nothing is sent again)
            self.store.set(t.id, status=TaskStatus.QUEUED, due=time.time() + 2.0)
            self.say(f"task {t.id}: {role} is busy; it waits its turn")
            return
        res = outcome.result
        output = (res.summary if res else log) or log
        if res is not None and res.session:
            self.store.set(t.id, session=res.session)
        # Slack first, then the status: whoever watches the status sees the thread already answered.
        if res is None or not res.ok or failed(output):
            why = res.error if res is not None and not res.ok else output[-500:]
            self.mark(t, "x", remove="eyes")
            self.post(t.where, *report.result(t.summary, t.intent, "failed", why, role))
            self.store.set(t.id, status=TaskStatus.FAILED, result=output or why)
        elif waiting(output):
            self.mark(t, "bell", remove="eyes")
            self.post(t.where, *report.result(t.summary, t.intent, "waiting", output, role))
            self.store.set(t.id, status=TaskStatus.WAITING, result=output)
        else:
            self.mark(t, "white_check_mark", remove="eyes")
            self.post(t.where, *report.result(t.summary, t.intent, "completed", output, role))
            self.store.set(t.id, status=TaskStatus.COMPLETED, result=output)

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
