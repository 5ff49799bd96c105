"""The Slack bridge: signed events over real HTTP, a fake Web API at the wire, requests asked of
the roles by mail and run by a real agentd, answers posted back."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from helpers.agent_clis import cli_bin, needs_claude, needs_codex, needs_gemini
from helpers.agentd import Daemon
from helpers.fake_anthropic import FakeAnthropic, tool_use
from helpers.fake_anthropic import text as anthropic_text
from helpers.fake_gemini import FakeGemini
from helpers.fake_gemini import call as gemini_call
from helpers.fake_gemini import text as gemini_text
from helpers.fake_openai import FakeOpenAI
from helpers.fake_openai import call as openai_call
from helpers.fake_openai import text as openai_text
from helpers.fake_slack import FakeSlack
from helpers.git import GIT_ENV, git_project
from helpers.project import Project, free_port
from helpers.sandboxing import needs_bwrap
from workflow.bridges.slack.intents import by_keywords, failed, waiting
from workflow.bridges.slack.settings import SlackConfig

SECRET = "s3cret"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    f = FakeSlack()
    yield f
    f.close()


def slack_project(
    tmp_path: Path, fake: FakeSlack, roles: str = '{ research = "spec-writer" }', extra: str = "", agentd: str = ""
) -> Project:
    """A project with the bridge configured; agentd runs its roles' scripts, each failure at once final."""
    p = git_project(
        tmp_path / "sl",
        f"""
[bridges.slack]
api_base_url = "{fake.url}"
port = {free_port()}
bot_user_id = "UBOT"
default_role = "coordinator"
roles = {roles}
{extra}
[agentd]
backend = "scripted"
rescan = 1
max_attempts = 1
{agentd}""",
    )
    (p.dir / "scripted").mkdir(exist_ok=True)
    (p.dir / "scripted" / "coordinator.toml").write_text('[[step]]\nsay = "Done: the summary is ready."\n')
    return p


def sign(body: bytes, ts: int | None = None, secret: str = SECRET) -> dict[str, str]:
    t = str(ts if ts is not None else int(time.time()))
    sig = "v0=" + hmac.new(secret.encode(), b"v0:" + t.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": t, "X-Slack-Signature": sig, "Content-Type": "application/json"}


def post(
    port: int, payload: dict[str, object], headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, str]:
    body = raw if raw is not None else json.dumps(payload).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/slack/events",
        data=body,
        method="POST",
        headers=headers if headers is not None else sign(body),
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def message(ev_id: str, ts: str, text: str, thread_ts: str | None = None, user: str = "U1") -> dict[str, object]:
    ev: dict[str, object] = {"type": "message", "channel": "C1", "user": user, "text": text, "ts": ts}
    if thread_ts:
        ev["thread_ts"] = thread_ts
    return {"type": "event_callback", "event_id": ev_id, "event": ev}


class Endpoint:
    """``workflow bridge slack`` as a process (HTTP mode, or Socket Mode with ``socket=True``),
    and the agentd that runs what it asks."""

    def __init__(self, p: Project, socket: bool = False) -> None:
        self.p = p
        self.agentd = Daemon(p)
        slack = p.app.config.section(SlackConfig)
        assert slack is not None
        self.port = slack.port
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WORKFLOW_", "SLACK_")) and k != "ANTHROPIC_API_KEY"
        }
        if socket:
            env["SLACK_APP_TOKEN"] = "xapp-test"
        ready = "connected to Slack in Socket Mode" if socket else "listening on"
        self.log = p.dir.parent / "slack.out"
        self.start = self.log.stat().st_size if self.log.exists() else 0  # this endpoint's part of the log
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "workflow", "bridge", "slack"],
                cwd=p.dir,
                env={**env, **GIT_ENV, "SLACK_SIGNING_SECRET": SECRET, "SLACK_BOT_TOKEN": "xoxb-test"},
                stdout=out,
                stderr=out,
            )
        end = time.monotonic() + 20
        while ready not in self.text():
            assert time.monotonic() < end and self.proc.poll() is None, self.text()
            time.sleep(0.05)

    def text(self) -> str:
        return self.log.read_bytes()[self.start :].decode(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the bridge and agentd (``sig``: SIGKILL for a crash of both)."""
        for proc in (self.proc, self.agentd.proc):
            if proc.poll() is None:
                proc.send_signal(sig)
                proc.wait(timeout=60)


def runs_log(p: Project) -> str:
    """What every agentd run of the project said (its run-role output)."""
    return "".join(f.read_text(errors="replace") for f in sorted(p.app.config.state.runs.glob("task-*.log")))


def running(p: Project) -> int:
    """How many runs agentd has running now."""
    import sqlite3

    db = sqlite3.connect(p.app.config.state.tasks)
    try:
        return int(db.execute("SELECT count(*) FROM task WHERE status='running'").fetchone()[0])
    finally:
        db.close()


def wait(cond: object, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < end, what
        time.sleep(0.05)


def tasks(p: Project) -> list[dict[str, object]]:
    import sqlite3

    db = sqlite3.connect(p.app.config.mail_root / ".workflow" / "slack.sqlite")
    cur = db.execute("SELECT * FROM task ORDER BY id")
    cols = [c[0] for c in cur.description]
    out = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    db.close()
    return out


@pytest.mark.parametrize(
    "text,intent",
    [
        ("Please research the latest Python release", "research"),
        ("Fix the login bug in auth.py", "code_change"),
        ("Organize my notes into a list", "organize"),
        ("What is a Maildir?", "question"),
        ("Remind me about the dentist tomorrow", "reminder"),
        ("todo: buy milk", "todo"),
        ("show my todo list", "todo_check"),
        ("complete todo 3", "todo_complete"),
        ("hello there", "other"),
        ("最新のPython情報を調べて", "research"),
        ("ログイン画面を作って", "code_change"),
        ("Maildirとは何か教えて", "question"),
        ("メモを整理して", "organize"),
        ("明日の会議をリマインドして", "reminder"),
        ("牛乳を買う todo追加", "todo"),
        ("todo一覧", "todo_check"),
        ("todo完了 2", "todo_complete"),
    ],
)
def test_keyword_classification_table(text: str, intent: str) -> None:
    got = by_keywords(text)
    assert got.intent == intent, (text, got.reasoning)
    assert got.autonomy_level == 2


def test_large_scope_code_change_asks_first_and_detectors() -> None:
    assert by_keywords("新機能としてアーキテクチャを作って").clarify_question
    assert by_keywords("implement a new feature: rewrite the architecture").clarify_question
    assert by_keywords("fix the typo in the readme").clarify_question is None
    assert (
        failed("... 認証でエラーが発生しました")
        and failed("x" * 600 + "No tokens found")
        and not failed("failed " + "x" * 600)
    )
    assert waiting("Which one? Why? When?") and not waiting("Done?")


def test_claude_classifies_with_json_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.fake_anthropic import FakeAnthropic, text
    from workflow.bridges.slack.intents import classify

    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.add(
            text(
                '{"intent": "research", "summary": "s", "executionPrompt": "do it", "reasoning": "r", "autonomyLevel": 3}'
            )
        )
        got = classify("anything at all")
        assert (got.intent, got.method, got.autonomy_level, got.execution_prompt) == ("research", "claude", 2, "do it")
        assert dict(got.usage) == {"input_tokens": 10, "output_tokens": 5}  # for the budgets
        fake.error(500, "api_error")
        fake.error(500, "api_error")
        got = classify("todo: buy milk")
        assert got.intent == "todo" and got.method == "keywords" and "Claude failed" in got.reasoning


def test_signatures_retries_and_the_whole_task_path(tmp_path: Path, slack: FakeSlack) -> None:
    p = slack_project(tmp_path, slack)
    ep = Endpoint(p)
    try:
        assert post(ep.port, {"type": "url_verification", "challenge": "abc"}) == (200, '{"challenge": "abc"}')
        body = json.dumps(message("Ev1", "100.1", "Summarize the week")).encode()
        assert post(ep.port, {}, sign(body, secret="wrong"), body)[0] == 401
        assert post(ep.port, {}, sign(body, ts=int(time.time()) - 600), body)[0] == 401
        assert post(ep.port, {}, {"Content-Type": "application/json"}, body)[0] == 401
        assert tasks(p) == []  # nothing queued from refused requests
        assert "bad X-Slack-Signature" in ep.text() and "replay window" in ep.text()
        assert post(ep.port, {}, sign(body), body)[0] == 200
        retry = {**sign(body), "X-Slack-Retry-Num": "1"}
        assert post(ep.port, {}, retry, body)[0] == 200  # a retried delivery we already have
        assert post(ep.port, message("Ev2", "100.2", "ignore me", user="UBOT"))[0] == 200  # our own bot
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"], "the task to complete")
        assert len(tasks(p)) == 1
        assert slack.reactions("100.1") == ["eyes", "white_check_mark"]
        posted = slack.of("chat.postMessage")
        assert posted, slack.calls
        assert posted[-1]["thread_ts"] == "100.1" and "the summary is ready" in posted[-1]["text"]
        # The request went to the coordinator as workflow mail.
        qs = list(p.new_files("coordinator"))
        assert qs and b"Summarize the week" in qs[0].read_bytes()
        # A follow-up in the finished thread continues it with the earlier exchange as context.
        assert post(ep.port, message("Ev3", "100.3", "and last month?", thread_ts="100.1"))[0] == 200
        wait(lambda: len(tasks(p)) == 2 and tasks(p)[1]["status"] == "completed", "the follow-up")
        assert "Earlier in this thread" in str(tasks(p)[1]["prompt"]) and "Summarize the week" in str(
            tasks(p)[1]["prompt"]
        )
        assert "retry 1" in ep.text() and "already received" in ep.text()
        # Each task was one ordinary run of the coordinator by agentd, asked from the thread's address.
        st = json.loads(p.run("agentd", "status", "--json").stdout)
        assert (
            sorted((r["role"], r["kind"], r["ref"]) for r in st["recent"])
            == [("coordinator", "bridge", "slack+c1-100-1@workflow.local")] * 2
        ), st
        assert b"From: slack+c1-100-1@workflow.local" in qs[0].read_bytes()
    finally:
        ep.stop()


def test_clarify_then_reply_queues_thumbs_down_rejects_todo_and_failure(tmp_path: Path, slack: FakeSlack) -> None:
    p = slack_project(tmp_path, slack, '{ research = "spec-writer", code_change = "implementer" }')
    (p.dir / "scripted" / "implementer.toml").write_text('[[step]]\nfail = "could not build"\n')  # it fails
    ep = Endpoint(p)
    try:
        post(ep.port, message("E1", "200.1", "implement a new feature: rewrite the architecture of billing"))
        wait(lambda: tasks(p) and tasks(p)[0]["status"] == "pending", "pending")
        assert slack.reactions("200.1") == ["bell"]
        assert "large change" in slack.of("chat.postMessage")[0]["text"]
        post(ep.port, message("E2", "200.2", "only the invoice module, keep the API", thread_ts="200.1"))
        wait(lambda: tasks(p)[0]["status"] == "failed", "the clarified task to run (and fail)")
        assert "only the invoice module" in str(tasks(p)[0]["prompt"])
        assert slack.reactions("200.1")[-1] == "x"
        post(ep.port, message("E3", "300.1", "implement a new feature: replace the architecture"))
        wait(lambda: len(tasks(p)) == 2 and tasks(p)[1]["status"] == "pending", "second pending")
        post(
            ep.port,
            {
                "type": "event_callback",
                "event_id": "E4",
                "event": {"type": "reaction_added", "reaction": "-1", "item": {"ts": "300.1", "channel": "C1"}},
            },
        )
        wait(lambda: tasks(p)[1]["status"] == "rejected", "rejected")
        post(ep.port, message("E5", "400.1", "todo: buy milk"))
        wait(lambda: len(tasks(p)) == 3 and tasks(p)[2]["status"] == "completed", "todo")
        assert "memo" in slack.reactions("400.1")
        post(ep.port, message("E7", "450.1", "   "))
        wait(lambda: slack.reactions("450.1") == ["fast_forward"], "skipped")
        post(ep.port, message("E6", "500.1", "show my todo list"))
        wait(lambda: len(tasks(p)) == 4 and tasks(p)[3]["status"] == "completed", "todo list")
        assert "1. buy milk" in slack.of("chat.postMessage")[-1]["text"]
    finally:
        ep.stop()


def test_agentds_max_concurrent_holds_under_a_burst_and_a_sigkill_of_agentd_loses_no_answer(
    tmp_path: Path, slack: FakeSlack
) -> None:
    p = slack_project(
        tmp_path,
        slack,
        '{ research = "spec-writer", question = "spec-reviewer", organize = "implementer", reminder = "test-writer" }',
    )
    for role in ("spec-writer", "spec-reviewer", "implementer", "test-writer", "coordinator"):
        (p.dir / "scripted" / f"{role}.toml").write_text('[[step]]\nsleep = 1.5\n[[step]]\nsay = "finished"\n')
    ep = Endpoint(p)
    try:
        texts = ["research the market", "what is a Maildir?", "organize my notes", "remind me tomorrow", "hello"]
        for i, t in enumerate(texts):
            post(ep.port, message(f"B{i}", f"600.{i}", t))
        peak = 0
        end = time.monotonic() + 40
        while time.monotonic() < end:
            peak = max(peak, running(p))
            if [t["status"] for t in tasks(p)] == ["completed"] * 5:
                break
            time.sleep(0.05)
        assert [t["status"] for t in tasks(p)] == ["completed"] * 5
        assert peak == 3  # agentd's max_concurrent: the bridge starts nothing itself
        # agentd SIGKILLed while a task runs: the restarted agentd sees it through, and it is answered once.
        post(ep.port, message("K1", "700.1", "research the weather"))
        wait(lambda: running(p) == 1, "the run")
        ep.agentd.stop(signal.SIGKILL)
        ep.agentd = Daemon(p)
        wait(lambda: tasks(p)[5]["status"] == "completed", "the task to complete after agentd's crash")
        assert [c["thread_ts"] for c in slack.of("chat.postMessage")].count("700.1") == 2  # classified, answered
        assert slack.reactions("700.1") == ["eyes", "white_check_mark"]
    finally:
        ep.stop()


def test_replay_and_429_retry_after(tmp_path: Path, slack: FakeSlack) -> None:
    p = slack_project(tmp_path, slack)
    events = tmp_path / "events.jsonl"
    events.write_text(
        "\n".join(
            json.dumps(e) for e in [message("R1", "800.1", "todo: call Bob"), message("R1", "800.1", "todo: call Bob")]
        )
    )
    slack.rate_limit_next = 1
    env = {"SLACK_SIGNING_SECRET": SECRET, "SLACK_BOT_TOKEN": "xoxb-test", **GIT_ENV}
    r = p.run("bridge", "slack", "--replay", str(events), env=env)
    assert r.returncode == 0, r.stderr
    assert "replayed 1 event(s): completed 1" in r.stdout  # the same event twice is one task
    events.write_text(json.dumps(message("R2", "800.2", "list todos")))
    r = p.run("bridge", "slack", "--replay", str(events), env=env)
    assert "replayed 1 event(s): completed 2" in r.stdout
    assert "1. call Bob" in slack.of("chat.postMessage")[-1]["text"]
    assert slack.rate_limit_next == 0 and slack.reactions("800.1")[0] == "eyes"  # retried after Retry-After


def test_tasks_for_one_busy_role_wait_their_turn_each_run_sees_only_its_own_question_and_a_crash_resends_nothing(
    tmp_path: Path, slack: FakeSlack
) -> None:
    p = slack_project(tmp_path, slack, "{}")  # every intent goes to the default role, the coordinator
    with open(p.dir / "workflow.toml", "a") as f:
        f.write('\n[backends.scripted]\nrecord_dir = "prompts"\n')
    (p.dir / "scripted" / "coordinator.toml").write_text('[[step]]\nsleep = 1.0\n[[step]]\nsay = "handled"\n')
    ep = Endpoint(p)
    try:
        texts = ["summarize the week ALPHA", "what is a Maildir BRAVO?", "hello there CHARLIE"]
        for i, t in enumerate(texts):
            post(ep.port, message(f"F{i}", f"900.{i}", t))
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"] * 3, "the three tasks", timeout=60)
    finally:
        ep.stop()
    questions = [f.read_bytes() for f in p.new_files("coordinator")]
    assert len(questions) == 3  # one question mail per task, however long the coordinator was busy
    for i in range(3):
        assert slack.reactions(f"900.{i}") == ["eyes", "white_check_mark"]
    prompts = [f.read_text() for f in sorted((p.dir / "prompts").glob("coordinator-*.prompt.md"))]
    assert len(prompts) == 3
    for prompt in prompts:  # each run was handed its own request only
        assert sum(word in prompt for word in ("ALPHA", "BRAVO", "CHARLIE")) == 1, prompt[:2000]
    # A crash of the bridge and agentd while a task runs: the restart finishes it, sending its
    # question and reactions once.
    (p.dir / "scripted" / "coordinator.toml").write_text('[[step]]\nsleep = 3.0\n[[step]]\nsay = "handled"\n')
    ep = Endpoint(p)
    post(ep.port, message("K9", "990.1", "summarize the month DELTA"))
    wait(lambda: len(tasks(p)) == 4 and running(p) == 1, "running")
    ep.stop(signal.SIGKILL)
    ep2 = Endpoint(p)
    try:
        wait(lambda: tasks(p)[3]["status"] == "completed", "the recovered task", timeout=60)
    finally:
        ep2.stop()
    deltas = [f.read_bytes() for f in p.new_files("coordinator") if b"DELTA" in f.read_bytes()]
    assert len(deltas) == 1, b"\n=====\n".join(deltas).decode(errors="replace") + ep2.text()
    assert slack.reactions("990.1") == ["eyes", "white_check_mark"]


def _raw(port: int, data: bytes, body_mib: int = 0) -> bytes:
    """Send raw bytes (and ``body_mib`` MiB after them) on one connection; what came back."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        try:
            c.sendall(data)
            chunk = b"x" * (1 << 20)
            for _ in range(body_mib):
                c.sendall(chunk)
        except OSError:
            pass  # the server hung up on us: what it said first is what counts
        c.settimeout(10)
        out = b""
        try:
            while len(out) < 65536:
                got = c.recv(65536)
                if not got:
                    break
                out += got
                if b"\r\n\r\n" in out:
                    break
        except OSError:
            pass
        return out


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_http_mode_survives_hostile_requests(tmp_path: Path, slack: FakeSlack) -> None:
    """Each of these once broke the hand-written endpoint (issue 17, item 11); the bridge answers
    every one with a status line and goes on serving."""
    import socket

    p = slack_project(tmp_path, slack, extra="request_timeout = 1.0\n")
    ep = Endpoint(p)
    try:
        before = _peak_rss_mib(ep.proc.pid)
        head = b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        # A 200 MiB unsigned body announced as Content-Length: -1: refused, never buffered.
        said = _raw(ep.port, head + b"Content-Length: -1\r\n\r\n", body_mib=200)
        assert said.startswith(b"HTTP/1.1 4"), said[:200]
        # A body over max_body: 413 before it is read.
        said = _raw(ep.port, head + f"Content-Length: {200 << 20}\r\n\r\n".encode(), body_mib=4)
        assert said.startswith(b"HTTP/1.1 413"), said[:200]
        assert _peak_rss_mib(ep.proc.pid) < before + 50, (before, _peak_rss_mib(ep.proc.pid))
        # Content-Length: abc, and a signature that is not ASCII: a status line, not a traceback.
        assert _raw(ep.port, head + b"Content-Length: abc\r\n\r\n{}").startswith(b"HTTP/1.1 400")
        body = json.dumps(message("H1", "700.1", "hello")).encode()
        bad = head + f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0=\xe9\xe9\r\n".encode(
            "latin-1"
        )
        said = _raw(ep.port, bad + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert said.startswith(b"HTTP/1.1 401"), said[:200]
        # 200 stalled requests are closed after request_timeout; the bridge serves meanwhile and after.
        stalled = [socket.create_connection(("127.0.0.1", ep.port), timeout=10) for _ in range(200)]
        for c in stalled:
            c.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n")
        time.sleep(3.5)
        closed = 0
        for c in stalled:
            c.settimeout(5)
            try:
                closed += c.recv(1) == b""
            except OSError:
                closed += 1
            c.close()
        assert closed == 200
        # Signed events of shapes nobody expects: acknowledged, one log line each, the bridge lives.
        for i, odd in enumerate(
            (
                {"type": "event_callback", "event_id": "O1", "event": "a string"},
                {"type": "event_callback", "event_id": "O2", "event": {"type": "reaction_added", "item": "x"}},
                {"type": "event_callback", "event_id": "O3", "event": {"type": "message", "channel": ["C1"]}},
                {"type": "event_callback", "event_id": "O4"},
            )
        ):
            assert post(ep.port, odd)[0] < 500, i
        assert post(ep.port, {}, sign(b"[1, 2]"), b"[1, 2]")[0] < 500
        assert post(ep.port, message("H2", "700.2", "Summarize the week"))[0] == 200
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"], "a task after all that")
        assert ep.proc.poll() is None and "Traceback" not in ep.text()
    finally:
        ep.stop()


def test_http_mode_answers_signed_requests_while_200_connections_stall(tmp_path: Path, slack: FakeSlack) -> None:
    """Issue 34, item 16: 200 connections from another address send a header line now and then
    (never silent, so the idle timeout never closes them) and hold every place; Slack's signed
    requests must still be answered, promptly."""
    import socket
    import threading

    p = slack_project(tmp_path, slack)  # the defaults: request_timeout 10 s, max_connections 100
    ep = Endpoint(p)
    stalled: list[socket.socket] = []
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.5):
            for c in list(stalled):
                try:
                    c.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    try:
        for _ in range(200):
            c = socket.socket()
            c.bind(("127.0.0.2", 0))  # another host, as far as the server can tell
            c.settimeout(5)
            try:
                c.connect(("127.0.0.1", ep.port))
                c.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                c.close()
                continue
            stalled.append(c)
        threading.Thread(target=trickle, daemon=True).start()
        time.sleep(0.5)  # every place is taken now (the old server stopped accepting here)
        answered = []
        t0 = time.monotonic()
        for i in range(5):
            status, _ = post(ep.port, message(f"ST{i}", f"720.{i}", "Summarize the week"))
            answered.append((status, round(time.monotonic() - t0, 1)))
        assert [s for s, _ in answered] == [200] * 5, answered
        assert answered[-1][1] < 8.0, answered  # within the read deadline, not after the stall gives up
        assert ep.proc.poll() is None
    finally:
        stop.set()
        for c in stalled:
            c.close()
        ep.stop()


def test_the_installed_waitress_has_what_the_guard_relies_on() -> None:
    from workflow.bridges.slack.guard import missing_private_api

    assert missing_private_api() == []


def test_socket_mode_receives_acknowledges_and_watches_only_its_channel(tmp_path: Path, slack: FakeSlack) -> None:
    """Socket Mode (no public URL) through the fake's websocket; channel = "#argus-inbox" by name."""
    p = slack_project(tmp_path, slack, extra='channel = "#argus-inbox"\n')
    slack.channel_names.update({"C1": "argus-inbox", "C2": "random"})
    ep = Endpoint(p, socket=True)
    try:
        assert slack.of("apps.connections.open") and slack.sockets == 1
        other = message("S0", "800.0", "Summarize the week")
        other["event"]["channel"] = "C2"  # type: ignore[index]
        e0 = slack.push(other)
        e1 = slack.push(message("S1", "800.1", "Summarize the week"))
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"], "the task from #argus-inbox")
        wait(lambda: {e0, e1} <= set(slack.acks), "both envelopes acknowledged")
        assert len(tasks(p)) == 1 and tasks(p)[0]["ts"] == "800.1"  # C2's message was not taken
        assert slack.reactions("800.1") == ["eyes", "white_check_mark"] and slack.reactions("800.0") == []
        slack.push(message("S1", "800.1", "Summarize the week"))  # Slack redelivers: ignored
        wait(lambda: "already received" in ep.text(), "the redelivery to be ignored")
        assert len(tasks(p)) == 1
    finally:
        ep.stop()


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        (
            "お疲れ様です！すみません、ちょっと最新のReact 19の変更点について調べてもらえますか？よろしくお願いします",
            "最新のReact 19の変更点について調べて",
        ),
        (
            "Hi team, could you please research the latest changes in React 19 for me? Thanks!",
            "Research the latest changes in React 19",
        ),
        (
            "Good morning! Hope you had a great weekend. I was wondering if you could fix the login bug on the "
            "settings page when you have a moment.",
            "Fix the login bug on the settings page",
        ),
        ("ログイン画面のバグを直してください。", "ログイン画面のバグを直して"),
        ("新機能を実装してほしいです。詳細は後で送ります。", "新機能を実装して"),
        ("Summarize the week", "Summarize the week"),
        (
            "Um, sorry to bother you, but if possible could you please look up the rate limits of the Slack API?",
            "Look up the rate limits of the Slack API",
        ),
        ("Uh, so, sorry, would it be possible to fix the flaky deploy?", "Fix the flaky deploy"),
        ("Well, I was hoping you could research vector databases, if you don't mind.", "Research vector databases"),
        ("Sorry for the noise. Could you check the billing page?", "Check the billing page"),
    ],
)
def test_the_summary_is_the_action_phrase_without_filler(text: str, summary: str) -> None:
    assert by_keywords(text).summary == summary


def test_a_long_summary_is_cut_on_a_word_boundary() -> None:
    s = by_keywords(
        "what is the status of the billing migration and who owns it and when will it be done and why"
    ).summary
    assert len(s) <= 80 and s.endswith("it…") and s.startswith("What is the status")


def _blocks(call: dict[str, object]) -> list[dict[str, object]]:
    raw = call.get("blocks")
    return json.loads(raw) if isinstance(raw, str) else list(raw or [])  # type: ignore[arg-type]


def _block_text(call: dict[str, object]) -> str:
    return json.dumps(_blocks(call), ensure_ascii=False)


def test_each_role_has_its_agentd_timeout_and_messages_are_block_kit(tmp_path: Path, slack: FakeSlack) -> None:
    p = slack_project(tmp_path, slack, agentd="role_timeouts = { spec-writer = 1 }\n")
    (p.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsleep = 4\n[[step]]\nsay = "too late"\n')
    ep = Endpoint(p, socket=True)
    try:
        slack.push(message("T1", "900.1", "Could you research <!channel> the latest React changes?"))
        slack.push(message("T2", "900.2", "Summarize the week"))
        wait(lambda: sorted(str(t["status"]) for t in tasks(p)) == ["completed", "failed"], "both tasks")
        research, other = sorted(tasks(p), key=lambda t: str(t["ts"]))  # Bolt may hand them over in any order
        assert research["intent"] == "research" and research["status"] == "failed"
        assert "timed out after 1s" in str(research["result"])
        assert other["status"] == "completed"  # the role's own timeout: the 1 s is research's alone
        posts = [c for c in slack.of("chat.postMessage") if c.get("thread_ts") == "900.1"]
        first, last = posts[0], posts[-1]
        assert "*Intent*\\nresearch" in _block_text(first) and "queued" in _block_text(first)
        assert "&lt;!channel&gt;" in _block_text(first) and "<!channel>" not in _block_text(first)
        assert first["text"].startswith("Task: ")  # the plain-text fallback
        assert "*Failed:*" in _block_text(last) and ":x: failed" in _block_text(last)
        assert "timed out after 1s" in _block_text(last) and "timed out after 1s" in str(last["text"])
        done = [c for c in slack.of("chat.postMessage") if c.get("thread_ts") == "900.2"][-1]
        assert "*Done:*" in _block_text(done) and "the summary is ready" in _block_text(done)
    finally:
        ep.stop()
    # The bridge's own timeouts of old are refused, naming where a run's time is set now.
    cfg = p.dir / "workflow.toml"
    cfg.write_text(cfg.read_text().replace("[bridges.slack]\n", "[bridges.slack]\ntimeouts = { research = 1 }\n"))
    r = p.run("bridge", "slack", "--replay", "/dev/null")
    assert r.returncode != 0 and "[bridges.slack] timeouts: no longer a key here" in r.stderr, r.stderr
    assert "[agentd] role_timeouts" in r.stderr


AGENT = """#!/bin/sh
# An agent CLI that reports its session (as `claude -p --output-format json` does) and resumes one.
prompt=$(cat)
workflow finish done >/dev/null || exit 9  # a run keeps nothing unless its agent finishes
if [ "$1" = "--resume" ]; then
  [ -f "$(dirname "$0")/resume-fails" ] && { echo "no such session $2" >&2; exit 1; }
  printf '{"session_id": "%s", "result": "resumed %s, env %s"}\\n' "$2" "$2" "$WORKFLOW_SESSION"
else
  case "$prompt" in
    *"Earlier in this thread"*) echo '{"session_id": "sess-2", "result": "a new run that knows the earlier exchange"}' ;;
    *) echo '{"session_id": "sess-1", "result": "Done: the summary is ready."}' ;;
  esac
fi
"""


def test_a_follow_up_resumes_the_tasks_agent_session_or_falls_back_to_a_new_run(
    tmp_path: Path, slack: FakeSlack
) -> None:
    p = slack_project(tmp_path, slack)
    agent = p.dir / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    cfg = p.dir / "workflow.toml"
    cfg.write_text(
        cfg.read_text().replace('backend = "scripted"', 'backend = "command"')
        + f'\n[backends.command]\nargv = ["sh", "{agent}"]\nresume = ["--resume", "{{session}}"]\ncontain = "none"\n'
    )
    ep = Endpoint(p, socket=True)
    try:
        slack.push(message("F1", "950.1", "Summarize the week"))
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"], "the first task")
        assert tasks(p)[0]["session"] == "sess-1" and tasks(p)[0]["result"] == "Done: the summary is ready."
        slack.push(message("F2", "950.2", "and last month?", thread_ts="950.1"))
        wait(lambda: len(tasks(p)) == 2 and tasks(p)[1]["status"] == "completed", "the follow-up")
        assert tasks(p)[1]["resume"] == "sess-1"
        assert tasks(p)[1]["result"] == "resumed sess-1, env sess-1"
        assert "resuming session sess-1" in ep.text() and "resuming session sess-1" in runs_log(p)
        # The session cannot be resumed: a new run with the earlier exchange.
        (p.dir / "resume-fails").write_text("")
        slack.push(message("F3", "950.3", "and the year?", thread_ts="950.1"))
        wait(lambda: len(tasks(p)) == 3 and tasks(p)[2]["status"] == "completed", "the fallback")
        assert tasks(p)[2]["result"] == "a new run that knows the earlier exchange"
        assert "resuming session sess-1 failed" in runs_log(p)
    finally:
        ep.stop()


class Model(NamedTuple):
    """A stand-in model API for one agent CLI: its server, the variables that point the CLI at it,
    a turn that finishes the run saying ``said``, a turn that only says it, and what it was asked."""

    server: Any
    env: dict[str, str]
    finish: Callable[[str, int], Any]
    say: Callable[[str], Any]
    asked: Callable[[], list[str]]  # every agent turn's request, as JSON


def stand_in(cli: str) -> Model:
    if cli == "claude-code":
        a = FakeAnthropic(cli=True)
        return Model(
            a,
            {"ANTHROPIC_BASE_URL": a.url, "ANTHROPIC_AUTH_TOKEN": "sk-x"},  # not ANTHROPIC_API_KEY: keyword intents
            lambda said, n: tool_use("mcp__workflow__finish", {"status": "done", "summary": said}, f"toolu_{n}"),
            anthropic_text,
            lambda: [json.dumps(q) for q in a.requests if q.get("tools")],
        )
    if cli == "codex":
        o = FakeOpenAI()
        finish = {"status": "done"}
        return Model(
            o,
            {"OPENAI_BASE_URL": o.url, "OPENAI_API_KEY": "sk-x"},
            lambda said, n: openai_call("finish", {**finish, "summary": said}, f"call_{n}", namespace="mcp__workflow"),
            openai_text,
            lambda: [json.dumps(q) for q in o.requests],
        )
    g = FakeGemini()
    return Model(
        g,
        g.env(),
        lambda said, n: gemini_call("mcp_workflow_finish", {"status": "done", "summary": said}),
        gemini_text,
        lambda: [json.dumps(q.body) for q in g.requests],
    )


@needs_bwrap
@pytest.mark.parametrize(
    "cli",
    [
        pytest.param("claude-code", marks=needs_claude),
        pytest.param("codex", marks=needs_codex),
        pytest.param("gemini", marks=needs_gemini),
    ],
)
def test_a_follow_up_resumes_the_real_agent_cli_session_of_its_task(
    tmp_path: Path, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    """Issue 35: resume failed whenever ~/.claude did not exist before the first run (the
    transcript went to the sandbox's tmpfs), and Codex's and Gemini CLI's sessions were never
    read. With each CLI's profile the session lives in the role's own CLI state, and the
    follow-up's run resumes it: the model sees the first run's exchange."""
    p = slack_project(tmp_path, slack)
    cfg = p.dir / "workflow.toml"
    cfg.write_text(
        cfg.read_text().replace('backend = "scripted"', f'backend = "{cli}"')
        + ('\n[backends.codex]\nmodel = "gpt-test"\n' if cli == "codex" else "")  # its MCP tools as functions
    )
    model = stand_in(cli)
    with model.server:
        monkeypatch.setenv("PATH", f"{cli_bin()}:{os.environ['PATH']}")
        for name, value in model.env.items():
            monkeypatch.setenv(name, value)
        for n, said in ((1, "Weekly summary: FIRST-ANSWER"), (2, "Monthly summary: SECOND-ANSWER")):
            model.server.add(model.finish(said, n))
            model.server.add(model.say(said))
        ep = Endpoint(p, socket=True)
        try:
            slack.push(message("R1", "960.1", "Please research what we shipped this week"))
            wait(lambda: [t["status"] for t in tasks(p)] in (["completed"], ["failed"]), "the first task", 90)
            assert tasks(p)[0]["status"] == "completed", (tasks(p), ep.text())
            session = str(tasks(p)[0]["session"])
            assert session and "FIRST-ANSWER" in str(tasks(p)[0]["result"]), tasks(p)
            slack.push(message("R2", "960.2", "and last month?", thread_ts="960.1"))
            wait(lambda: len(tasks(p)) == 2 and tasks(p)[1]["status"] in ("completed", "failed"), "the follow-up", 90)
            assert tasks(p)[1]["status"] == "completed", (tasks(p), ep.text())
            assert tasks(p)[1]["resume"] == session and f"resuming session {session}" in ep.text()
            assert "FIRST-ANSWER" in model.asked()[-1]  # the first run's exchange, from the CLI's own session
        finally:
            ep.stop()


def test_the_inbox_agents_flows_end_to_end(tmp_path: Path, slack: FakeSlack) -> None:
    """003_…'s flows through Socket Mode, without an API key (keywords classify): a Japanese
    research request runs and completes; a large code change asks first, the reply in the thread
    queues it and it completes; a thumbs-down rejects a pending one. (Three tasks for one busy
    role: test_tasks_for_one_busy_role_wait_their_turn_….)"""
    p = slack_project(tmp_path, slack, '{ research = "spec-writer", code_change = "implementer" }')
    (p.dir / "scripted" / "spec-writer.toml").write_text('[[step]]\nsay = "React 19: Actions, use(), ref as a prop."\n')
    (p.dir / "scripted" / "implementer.toml").write_text('[[step]]\nsay = "Invoice module updated; API unchanged."\n')
    ep = Endpoint(p, socket=True)
    try:
        slack.push(message("J1", "990.1", "お疲れ様です。最新のReact 19の変更点について調べてもらえますか？"))
        wait(lambda: [t["status"] for t in tasks(p)] == ["completed"], "the research task")
        (research,) = tasks(p)
        assert research["intent"] == "research" and research["summary"] == "最新のReact 19の変更点について調べて"
        assert slack.reactions("990.1") == ["eyes", "white_check_mark"]
        assert "React 19: Actions" in _block_text(slack.of("chat.postMessage")[-1])
        slack.push(message("J2", "991.1", "新機能を実装して: 請求のアーキテクチャをリプレース"))
        wait(lambda: len(tasks(p)) == 2 and tasks(p)[1]["status"] == "pending", "the clarify question")
        assert slack.reactions("991.1") == ["bell"]
        slack.push(message("J3", "991.2", "請求書モジュールだけ。APIはそのまま。", thread_ts="991.1"))
        wait(lambda: tasks(p)[1]["status"] == "completed", "the clarified task")
        assert "請求書モジュールだけ" in str(tasks(p)[1]["prompt"])
        assert slack.reactions("991.1")[-1] == "white_check_mark"
        slack.push(message("J4", "992.1", "implement a new feature: rewrite the architecture"))
        wait(lambda: len(tasks(p)) == 3 and tasks(p)[2]["status"] == "pending", "another pending")
        slack.push(
            {
                "type": "event_callback",
                "event_id": "J5",
                "event": {"type": "reaction_added", "reaction": "-1", "item": {"ts": "992.1", "channel": "C1"}},
            }
        )
        wait(lambda: tasks(p)[2]["status"] == "rejected", "rejected")
    finally:
        ep.stop()
