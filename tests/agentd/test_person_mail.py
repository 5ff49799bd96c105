"""No person's mail is ignored: alice's and bob's mail from the real msmtp, with no header of ours,
through `workflow up` with spec-writer on the anthropic backend (a stand-in Messages API at the
wire). alice's plain question wakes spec-writer and its answer comes back in her thread; bob's
"Apprvoed" gets a request to confirm and moves nothing until he does; his typed mail works as
before; mail that wakes nobody is answered saying why. Every mail a person sent is counted: a run
woken, a decision applied, or an answer mailed back."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from helpers.agentd import default_sigint, wait_until
from helpers.fake_anthropic import message
from helpers.git import GIT_ENV, git_project, sh
from helpers.people import add_people, msmtp
from helpers.pipeline_model import mail_in, send
from helpers.project import Project
from helpers.wire import Served, reply
from workflow.mail.message import Parsed, parse

pytestmark = pytest.mark.skipif(shutil.which("msmtp") is None, reason="needs msmtp (scripts/system-packages)")


class Writer(Served):
    """spec-writer as a model would play it: every new question gets an answer in its thread."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                reply(self, 200, json.dumps(model.answer(body)).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.serve(Handler)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages", [])
        prompt = messages[0]["content"] if messages and isinstance(messages[0]["content"], str) else ""
        done = sum(1 for m in messages[1:] if m["role"] == "user")
        if len(messages) == 1:
            with self.lock:
                self.prompts.append(prompt)
        steps = [
            send(
                "answer",
                "specs/*/user-auth.md",
                [m.sender],
                m.message_id,
                {"CONTEXT": "Yes: this week, in a spec first."},
            )
            for m in mail_in(prompt)
            if m.new and m.event == "question"
        ]
        if done < len(steps):
            step = steps[done]
            content = [{"type": "tool_use", "id": f"toolu_{done}", "name": step["tool"], "input": step["args"]}]
        else:
            finish = {"status": "done", "summary": "answered"}
            content = [{"type": "tool_use", "id": f"toolu_{done}", "name": "finish", "input": finish}]
        return message(content, "tool_use", (100, 20))


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _mail(p: Project, box: str) -> list[Parsed]:
    out = []
    for f in p.new_files(box):
        try:
            out.append(parse(f.read_bytes()))
        except FileNotFoundError:
            continue  # marked read meanwhile: the next look finds it
    return out


def _replies(p: Project, box: str, parent: str) -> list[Parsed]:
    return [m for m in _mail(p, box) if m.in_reply_to == parent]


def _sent(p: Project, login: str, text: str) -> str:
    r = msmtp(p, login, p.app.config.smtp.port, text)
    assert r.returncode == 0, r.stderr
    found: list[str] = []
    wait_until(lambda: bool(found.extend(_ids(p, text.split("\n\n", 1)[1].strip())) or found), "the mail stored")
    return found[0]


def _ids(p: Project, needle: str) -> list[str]:
    out = []
    for f in p.new_files():
        try:
            raw = f.read_bytes()
        except FileNotFoundError:
            continue
        if needle.encode() in raw:
            out.append(parse(raw).message_id or "")
    return out[:1]


def test_every_persons_mail_has_an_effect_or_an_answer(tmp_path: Path) -> None:
    p = git_project(tmp_path / "ad", '\n[agentd]\nrescan = 1\nroles = ["spec-writer", "implementer"]\n')
    toml = p.dir / "workflow.toml"
    toml.write_text(toml.read_text().replace('backend = "scripted"', 'backend = "anthropic"'))
    p = add_people(p)
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-q", "-m", "bob reviews specs himself")
    with Writer() as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKFLOW_", "ANTHROPIC_"))}
        env.update(GIT_ENV, ANTHROPIC_API_KEY="sk-stand-in", ANTHROPIC_BASE_URL=model.url)
        out = tmp_path / "up.out"
        with open(out, "wb") as f:
            up = subprocess.Popen(
                [sys.executable, "-m", "workflow", "up"],
                cwd=p.dir,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                preexec_fn=default_sigint,
            )
        try:
            wait_until(lambda: _listening(p.app.config.smtp.port) and b"started" in out.read_bytes(), "workflow up")
            request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
            thread = f"In-Reply-To: {request}\nReferences: {request}\n"

            # alice's plain mail wakes spec-writer, and its answer comes back in her thread
            csv = _sent(
                p, "alice", "To: spec-writer@workflow.local\nSubject: CSV\n\ncan we get CSV export done this week?\n"
            )
            wait_until(lambda: _replies(p, "user", csv), "spec-writer's answer to alice", timeout=60)
            [answer] = _replies(p, "user", csv)
            assert answer.event == "answer" and answer.sender == "spec-writer@workflow.local"
            assert any(csv in prompt for prompt in model.prompts)

            # bob's near decision: a request to confirm, from spec-writer in his thread; nothing moves
            slip = _sent(
                p, "bob", f"To: spec-writer@workflow.local\nSubject: Re: user-auth\n{thread}\nApprvoed, nice work\n"
            )
            wait_until(lambda: _replies(p, "spec-reviewer", slip), "the request to confirm")
            [confirm] = _replies(p, "spec-reviewer", slip)
            body = next(
                f for f in p.new_files("spec-reviewer") if parse(f.read_bytes()).message_id == confirm.message_id
            )
            said = body.read_text()
            assert confirm.event == "question" and confirm.sender == "spec-writer@workflow.local"
            assert '"Apprvoed, nice work"' in said and "Approved (an approval)" in said and "Nothing has moved" in said
            assert (p.dir / "specs/proposed/user-auth.md").exists()

            # he confirms in that thread: applied as his move
            yes = _sent(
                p,
                "bob",
                f"To: spec-writer@workflow.local\nSubject: Re: user-auth\nIn-Reply-To: {confirm.message_id}\n"
                f"References: {request} {slip} {confirm.message_id}\n\nApprove, yes.\n",
            )
            wait_until(lambda: (p.dir / "specs/todo/user-auth.md").exists(), "bob's confirmed approval applied")

            # typed by a client that can: a question that wakes spec-writer, as before
            typed = _sent(
                p,
                "bob",
                "To: spec-writer@workflow.local\nSubject: typed\nX-Event-Type: question\n\nAnd the export format?\n",
            )
            wait_until(lambda: _replies(p, "spec-reviewer", typed), "spec-writer's answer to bob")

            # mail that wakes nobody (implementer takes no questions): answered, saying why
            nobody = _sent(p, "bob", "To: implementer@workflow.local\nSubject: hi\n\nhow is it going?\n")
            wait_until(lambda: _replies(p, "spec-reviewer", nobody), "the answer saying why not")
            [why] = _replies(p, "spec-reviewer", nobody)
            text = next(
                f for f in p.new_files("spec-reviewer") if parse(f.read_bytes()).message_id == why.message_id
            ).read_text()
            assert "woke nobody" in text and "implementer wakes on approval, answer, rejection" in text, text

            # the count: every mail a person sent had an effect or an answer
            events = [
                json.loads(line) for line in p.app.config.state.agentd_log.read_text().splitlines() if line.strip()
            ]
            decided = {e.get("message_id") for e in events if e["event"] == "decided"}
            triggers = p.app.roster.roles["spec-writer"].triggers  # a run woken by it: handed to it as new trigger mail
            woke = {m.message_id for prompt in model.prompts for m in mail_in(prompt) if m.new and m.event in triggers}
            effects = {
                mid: [
                    *(["run"] if mid in woke else []),
                    *(["decision"] if mid in decided else []),
                    *(["answer"] if _replies(p, "user", mid) or _replies(p, "spec-reviewer", mid) else []),
                ]
                for mid in (csv, slip, yes, typed, nobody)
            }
            assert effects == {
                csv: ["run", "answer"],
                slip: ["answer"],
                yes: ["decision"],
                typed: ["run", "answer"],
                nobody: ["answer"],
            }, effects
        finally:
            up.send_signal(signal.SIGINT)
            up.wait(timeout=60)
