"""Pipeline model: a stand-in Messages API that plays every built-in role as a capable model would.

It answers ``POST /v1/messages`` at the wire, so the real anthropic SDK inside run-role drives it,
or the real Claude Code from npm (``backend = "claude-code"``): then the answers stream, side
requests with no tools get a plain "ok", our tools are named ``mcp__workflow__<tool>`` both ways,
the role is read from the prompt's ``# Role: NAME`` in the first user turn (a list of blocks after
Claude Code's own), tool results come as lists of text blocks, and after ``finish`` the model says
its last word.
Each answer is computed from the request alone (the role from the system prompt, the handed mail
from the first user turn, what the tools answered so far from the later turns), so concurrent
runs of different roles never share state here. Each role does only what its role file allows:

* spec-writer: a person's question → drafts the spec, answers the person, asks spec-reviewer for a
  review; a clarification-request → revises the spec and answers in the thread;
* spec-reviewer: a review-request → asks one clarification; the answer → approves (moves the
  spec to todo/ naming no NEXT_ROLES: its role's hands_off
  copies it to skeleton-writer and test-writer);
* skeleton-writer / test-writer: the spec's approval → moves the spec todo → doing (one of the
  two wins; the other finds it there), writes its own artifact in proposed/, asks its reviewer;
* skeleton-reviewer / test-reviewer: a review-request → approve (no NEXT_ROLES: hands_off names
  implementer);
* implementer: once the skeleton and the tests are both approved → moves them to doing, then the
  spec, the skeleton and the tests to done, and tells the person.

With ``spec_reviewer="spec-reviewer-panel"`` spec-writer asks that review panel instead; a panel
member on Claude Code (its requests come here too: streamed, with side questions that offer no
tools) reviews and approves (``VERDICT: approve``).

Every request is recorded (``calls``), with the role, so a test can count runs and model calls.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, NamedTuple

from helpers.fake_anthropic import events, message
from helpers.fake_anthropic import text as said_text
from helpers.wire import Served, reply

MAIL = re.compile(
    r"^## (NEW )?(\S+) from (\S+) \(.*?\)\n(?:.*?Artifacts: ([^·\n]+))?.*?\nMessage-ID: (<[^>\s]+>)",
    re.M,
)


class Mail(NamedTuple):
    new: bool
    event: str
    sender: str
    artifacts: tuple[str, ...]
    message_id: str


class Call(NamedTuple):
    role: str
    first: bool  # the run's first model call (its prompt holds the handed mail)
    prompt: str
    at: float = 0.0  # time.time() when it came


def mail_in(prompt: str) -> list[Mail]:
    out = []
    for m in MAIL.finditer(prompt):
        arts = tuple(a.strip() for a in (m.group(4) or "").split(",") if a.strip())
        out.append(Mail(bool(m.group(1)), m.group(2), m.group(3), arts, m.group(5)))
    return out


def about(mail: Mail, name: str) -> bool:
    return any(a.rsplit("/", 1)[-1] == f"{name}.md" for a in mail.artifacts)


SPEC_V1 = "# Rate limit\n\nThe public API allows 100 requests per minute per API key.\n"
SPEC_V2 = SPEC_V1 + "\nOver the limit: 429 with Retry-After (seconds until the window resets).\n"
OWN = {"skeleton-writer": ("skeleton", "skeleton-reviewer"), "test-writer": ("tests", "test-reviewer")}


def tool(name: str, **args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


def send(event: str, artifact: str, to: list[str], reply: str | None, variables: dict[str, str]) -> dict[str, Any]:
    args: dict[str, Any] = {"event": event, "artifact": artifact, "to": to, "variables": variables}
    return tool("send_message", **args, **({"in_reply_to": reply} if reply else {}))


def say(text: str) -> dict[str, Any]:
    return {"say": text}


def plan(role: str, prompt: str, results: list[str], spec_reviewer: str = "spec-reviewer") -> list[dict[str, Any]]:
    """The whole run's actions, given what the tools have answered so far (the plan may depend on
    them: the implementer reads where the skeleton and the tests are before it acts)."""
    new = [m for m in mail_in(prompt) if m.new]
    steps: list[dict[str, Any]] = []
    if role == "spec-writer":
        for m in new:
            if m.event == "question" and about(m, "rate-limit"):
                steps += [
                    tool("write_artifact", path="specs/proposed/rate-limit.md", content=SPEC_V1),
                    send(
                        "answer",
                        "specs/*/rate-limit.md",
                        [m.sender],
                        m.message_id,
                        {"CONTEXT": "Drafted specs/proposed/rate-limit.md; spec-reviewer reviews it."},
                    ),
                    send(
                        "review-request",
                        "specs/*/rate-limit.md",
                        [spec_reviewer],
                        None,
                        {"CONTEXT": "Focus on what happens over the limit."},
                    ),
                ]
            elif m.event == "clarification-request" and about(m, "rate-limit"):
                steps += [
                    tool("write_artifact", path="specs/proposed/rate-limit.md", content=SPEC_V2),
                    send(
                        "answer",
                        "specs/*/rate-limit.md",
                        [m.sender],
                        m.message_id,
                        {"CONTEXT": "429 with Retry-After; the spec says so now."},
                    ),
                ]
    elif role == "spec-reviewer":
        for m in new:
            if m.event == "review-request" and about(m, "rate-limit"):
                steps.append(
                    send(
                        "clarification-request",
                        "specs/*/rate-limit.md",
                        [m.sender],
                        m.message_id,
                        {"QUESTION": "What does a client get over the limit?", "BLOCKING": "yes"},
                    )
                )
            elif m.event == "answer" and about(m, "rate-limit"):
                steps += [
                    tool("read_artifact", path="specs/*/rate-limit.md"),
                    tool("move_artifact", artifact="rate-limit", state="todo", reason="Complete and testable"),
                    send(
                        "approval",
                        "specs/*/rate-limit.md",
                        [m.sender],
                        m.message_id,
                        {"NEXT_STATE": "todo"},
                    ),
                ]
    elif role in OWN:
        kind, reviewer = OWN[role]
        for m in new:
            if m.event == "approval" and about(m, "rate-limit"):
                steps += [
                    tool("move_artifact", artifact="rate-limit", state="doing", reason=f"Writing the {kind}"),
                    tool(
                        "write_artifact",
                        path=f"specs/proposed/rate-limit-{kind}.md",
                        content=f"# Rate limit: {kind}\n\nFor specs/*/rate-limit.md.\n",
                    ),
                    send(
                        "review-request",
                        f"specs/*/rate-limit-{kind}.md",
                        [reviewer],
                        None,
                        {"CONTEXT": f"The {kind} for rate-limit."},
                    ),
                ]
    elif role in ("skeleton-reviewer", "test-reviewer"):
        kind = "skeleton" if role == "skeleton-reviewer" else "tests"
        for m in new:
            if m.event == "review-request" and about(m, f"rate-limit-{kind}"):
                steps += [
                    tool("read_artifact", path=f"specs/*/rate-limit-{kind}.md"),
                    tool("move_artifact", artifact=f"rate-limit-{kind}", state="todo", reason="Matches the spec"),
                    send(
                        "approval",
                        f"specs/*/rate-limit-{kind}.md",
                        [m.sender],
                        m.message_id,
                        {"NEXT_STATE": "todo"},
                    ),
                ]
    elif role == "implementer":
        if any(m.event == "approval" for m in new):
            steps += [
                tool("read_artifact", path="specs/*/rate-limit-skeleton.md"),
                tool("read_artifact", path="specs/*/rate-limit-tests.md"),
            ]
            if len(results) >= 2:
                where = [r.splitlines()[0] if r else "" for r in results[:2]]
                if all("/todo/" in w for w in where):
                    steps += [
                        tool("move_artifact", artifact="rate-limit-skeleton", state="doing", reason="Building"),
                        tool("move_artifact", artifact="rate-limit-tests", state="doing", reason="Building"),
                        tool("move_artifact", artifact="rate-limit", state="done", reason="Every test passes"),
                        tool("move_artifact", artifact="rate-limit-skeleton", state="done", reason="Built"),
                        tool("move_artifact", artifact="rate-limit-tests", state="done", reason="All pass"),
                        send(
                            "status-update",
                            "specs/*/rate-limit.md",
                            ["user"],
                            None,
                            {"CONTEXT": "rate-limit is implemented: spec, skeleton and tests are done."},
                        ),
                    ]
                else:
                    steps.append(say("Waiting for the other review before building."))
    return steps


def texts(content: object) -> str:
    """The text of a message's content, a system prompt or a tool result: a str, or a list of
    blocks whose text blocks are joined (Claude Code sends lists: its own blocks, then ours)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "" if content is None else json.dumps(content)


def called(messages: list[dict[str, Any]]) -> str:
    """The tool the model's last turn called ("" for none)."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            content = m["content"] if isinstance(m["content"], list) else []
            uses = [b.get("name", "") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            return str(uses[-1]) if uses else ""
    return ""


class PipelineModel(Served):
    """The stand-in API server; ``url`` goes into ANTHROPIC_BASE_URL."""

    def __init__(self, spec_reviewer: str = "spec-reviewer") -> None:
        self.spec_reviewer = spec_reviewer
        self.members: list[str] = []  # the prompts of the panel members' runs that came here
        self.calls: list[Call] = []
        self.refusals: list[tuple[str, str]] = []  # (role, what a tool refused)
        self.lock = threading.Lock()
        self.busy = 0.0  # seconds spent computing answers: the "model time" of the runs
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                t = time.monotonic()
                payload = model.answer(body) if "count_tokens" not in self.path else {"input_tokens": 10}
                with model.lock:
                    model.busy += time.monotonic() - t
                if body.get("stream") and payload.get("type") == "message":  # an agent CLI streams
                    reply(self, 200, events(payload), "text/event-stream")
                else:
                    reply(self, 200, json.dumps(payload).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.serve(Handler)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):  # an agent CLI's side question (a title…): every role's run offers tools
            return said_text("ok")
        said = json.dumps(body.get("messages", []))
        if "# Independent review" in said or "# Discussion round" in said:  # a panel member on an agent CLI
            with self.lock:
                self.members.append(said)
            return said_text(
                "Complete and testable: over the limit a client gets 429.\nVERDICT: approve", usage=(300, 30)
            )
        messages = body.get("messages", [])
        prompt = texts(messages[0]["content"]) if messages else ""
        # the role: our system prompt names it (anthropic); an agent CLI's system prompt is its own,
        # so the role is read from the prompt's "# Role: NAME" (agents.context), wherever the CLI puts it
        found = re.search(r"You are the (\S+) role", texts(body.get("system", ""))) or re.search(
            r"(?m)^# Role: (\S+)$", prompt
        )
        role = found.group(1) if found else "?"
        # Claude Code names the MCP server's tools mcp__workflow__<tool>: answered and read back so
        prefix = (
            "mcp__workflow__"
            if any(str(t.get("name", "")).startswith("mcp__workflow__") for t in body["tools"])
            else ""
        )
        results: list[str] = []
        for i, m in enumerate(messages[1:], 2):
            if m["role"] == "user" and isinstance(m["content"], list):
                for block in m["content"]:
                    if block.get("type") == "tool_result":
                        text = texts(block.get("content"))
                        results.append(text)
                        if block.get("is_error") and i == len(messages):  # each refusal once: when it is new
                            with self.lock:
                                self.refusals.append((role, text))
        with self.lock:
            # the run's first call: no turn of the model's yet (Claude Code adds a "system" message)
            self.calls.append(Call(role, not any(m["role"] == "assistant" for m in messages), prompt, time.time()))
        if called(messages) == prefix + "finish":  # an agent CLI goes on after finish: its last turn
            return said_text("Finished.", usage=(100, 5))
        steps = plan(role, prompt, results, self.spec_reviewer)
        done = len(results)
        if done < len(steps) and "tool" in steps[done]:
            step = steps[done]
            content = [
                {"type": "tool_use", "id": f"toolu_{done}", "name": prefix + step["tool"], "input": step["args"]}
            ]
            return message(content, "tool_use", (100, 20))
        last = steps[done]["say"] if done < len(steps) else "Nothing more to do for this mail."
        finish = {"status": "done", "summary": last}  # a run keeps nothing unless its agent finishes
        return message(
            [{"type": "tool_use", "id": f"toolu_{done}", "name": prefix + "finish", "input": finish}],
            "tool_use",
            (100, 20),
        )

    def runs(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.calls:
            if c.first:
                out[c.role] = out.get(c.role, 0) + 1
        return out
