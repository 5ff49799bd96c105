"""Tools: what an agent may do during a run — each call checked by the same rules as everything else.

read_artifact / write_artifact stay inside the artifact roots (no ``..``, no symlink out, no
dotfiles); move_artifact follows the transition graph and only the moves the role owns;
send_message composes and runs every delivery check (validation, visibility, guardrails) at
call time, so a refusal reaches the agent while it can still correct itself, and the message
is sent when the run succeeds; list_inbox and read_thread show only the role's own mail;
whoami says who the agent is and what it may do; finish ends the run with its outcome — a run
commits only when its agent finished with status "done" (``agents.runrole``). No tool takes a
sender or a role: identity is the run's. A refused call raises ToolError; backends (and the
MCP server, ``agents.toolserver``) hand its text back to the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflow.agents.calls import call_line
from workflow.app import App
from workflow.artifacts.announce import announce, move_tells
from workflow.artifacts.move import MoveRequest, move
from workflow.core import safeopen
from workflow.core.errors import ArtifactError, ToolError, WorkflowError
from workflow.core.locate import Artifact, Resolver, has_glob, locate, parse_path
from workflow.delivery.notify import NotifyRequest, split_list
from workflow.delivery.transport import Transport
from workflow.mail.body import part_text
from workflow.mail.inbox import group, read_row, render_inbox, render_thread, select, thread_rows
from workflow.mail.message import normalize_msgid
from workflow.policy.roles import Role

MAX_READ = 200_000
WRITES = ("write_artifact", "move_artifact", "send_message")  # what a read-only session may not call
STATUSES = ("done", "failed")
MAX_SUMMARY = 20_000

SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "read_artifact",
        "description": "Read an artifact. Paths like specs/*/name.md find it in whatever state folder it is now.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "write_artifact",
        "description": "Write (create or replace) an artifact at ROOT/STATE/NAME, e.g. specs/proposed/name.md.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "move_artifact",
        "description": "Move an artifact to another state folder with a git commit (only moves your role owns).",
        "input_schema": {
            "type": "object",
            "properties": {"artifact": {"type": "string"}, "state": {"type": "string"}, "reason": {"type": "string"}},
            "required": ["artifact", "state"],
        },
    },
    {
        "name": "send_message",
        "description": "Send a workflow message (sent when your run ends successfully). "
        "Give in_reply_to to reply in a thread; omit it to start a new thread.",
        "input_schema": {
            "type": "object",
            "properties": {
                "event": {"type": "string"},
                "artifact": {"type": "string"},
                "to": {"type": "array", "items": {"type": "string"}},
                "variables": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Template variables: CONTEXT, QUESTION, REASON, NEXT_STATE, NEXT_ROLES, BLOCKING_DETAILS…",
                },
                "in_reply_to": {"type": "string"},
            },
            "required": ["event", "artifact", "to"],
        },
    },
    {
        "name": "whoami",
        "description": "Who you are in this run: your role, its address, the mail handed to you, what you may do.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "finish",
        "description": 'End your run. status "done": your work is done and everything you did is kept '
        '(moves, writes, messages); "failed": you could not do it, nothing is kept and your mail is '
        "handed to a later run. Without finish(status='done') nothing of the run is kept.",
        "input_schema": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["done", "failed"]},
                "summary": {"type": "string", "description": "What you did, or why you could not."},
            },
            "required": ["status", "summary"],
        },
    },
    {
        "name": "list_inbox",
        "description": "List your unread mail by thread.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "read_thread",
        "description": "Read a thread you can see, as a transcript (attachments are listed under each "
        "message). With part=N, read text attachment N of the message message_id instead.",
        "input_schema": {
            "type": "object",
            "properties": {
                "message_id": {"type": "string"},
                "part": {"type": "integer", "minimum": 1, "description": "An attachment's number, as listed."},
            },
            "required": ["message_id"],
        },
    },
]


class RoleTools:
    """The tools of one run of one role."""

    def __init__(
        self,
        app: App,
        role: Role,
        transport: Transport,
        *,
        may_send: bool = True,
        read_only: bool = False,
        journal: Callable[[Artifact, Artifact], None] | None = None,
        wrote: Callable[[str], None] | None = None,
    ) -> None:
        """``transport`` is the run's (it checks each message and stages it until the run ends);
        ``journal`` hears of every move before it is committed (the run reverts it on failure);
        ``wrote`` of every artifact written (the run commits it when it succeeds, or puts it back)."""
        self.app = app
        self.role = role
        self.transport = transport
        self.may_send = may_send and role.takes_mail and not read_only
        self.read_only = read_only
        self.journal = journal
        self.wrote = wrote
        self.sent: list[str] = []  # Message-IDs of the messages the run has sent (staged until it ends)
        self.moved: list[str] = []
        self.written: list[str] = []
        self.finished: tuple[str, str] | None = None  # (status, summary) of the agent's finish call
        self.cut_short = ""  # why a call was stopped half done at the run's end: then the run fails
        self.handed: tuple[str, ...] = ()  # the Message-IDs the run was handed (whoami)
        self.calls: list[str] = []  # every call served, in order (the run's log lists them)

    def schemas(self) -> list[dict[str, Any]]:
        """The tools this session really has: a read-only one lacks the writing tools."""
        return [s for s in SCHEMAS if not (self.read_only and s["name"] in WRITES)]

    # -- dispatch

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool by name; ToolError for a refusal or bad arguments."""
        fn = getattr(self, f"tool_{name}", None)
        self.calls.append(call_line(name, args))
        if fn is None or name not in {s["name"] for s in SCHEMAS}:
            raise ToolError(f"unknown tool {name!r}; tools: {', '.join(s['name'] for s in SCHEMAS)}")
        if self.read_only and name in WRITES:
            raise ToolError(
                f"{name}: this session is read-only (an independent panel review); "
                "give your findings and end with a line VERDICT: approve|reject|revise"
            )
        try:
            return str(fn(**args))
        except TypeError as e:
            raise ToolError(f"{name}: bad arguments: {e}") from None
        except ToolError:
            raise
        except WorkflowError as e:
            raise ToolError(str(e)) from None

    # -- artifacts

    def _path(self, rel: object) -> str:
        """``rel`` when its text names ROOT/STATE/NAME under an artifact root: judged before anything
        on disk is looked at, so a refusal never tells whether some file exists."""
        config = self.app.config
        if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel or "\0" in rel:
            raise ToolError(f"artifact path {rel!r}: expected a relative path like specs/proposed/name.md")
        if ".." in rel.split("/"):
            raise ToolError(f"artifact path {rel!r}: '..' is not allowed")
        if parse_path(rel, config) is None and not has_glob(rel):
            roots = ", ".join(f"{r}/" for r in config.artifact_roots)
            raise ToolError(
                f"artifact path {rel!r} is not ROOT/STATE/NAME under an artifact root ({roots}) "
                f"with a state ({', '.join(config.states)})"
            )
        try:
            return safeopen.check(config, rel)
        except ArtifactError as e:
            raise ToolError(str(e)) from None

    def tool_read_artifact(self, path: str) -> str:
        self._path(path)
        target = path
        if has_glob(path) or not safeopen.exists(self.app.config, path):
            found = locate(path, self.app.config)
            if len(found) > 1:
                raise ToolError(f"{path}: several match: {', '.join(a.path for a in found)}")
            if not found:
                raise ToolError(f"{path}: no artifact matches")
            target = found[0].path
        try:
            data = safeopen.read(self.app.config, target, MAX_READ).decode("utf-8", "replace")
        except ArtifactError:
            raise ToolError(f"{path}: no artifact matches") from None  # gone meanwhile: the same answer
        return f"# {target}\n{data}"

    def tool_write_artifact(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        self._path(path)
        a = parse_path(path, self.app.config)
        if a is None:
            raise ToolError(f"artifact path {path!r}: write to a concrete path like specs/proposed/name.md, not a glob")
        elsewhere = [x.path for x in locate(a.glob, self.app.config) if x.path != a.path]
        if elsewhere:
            raise ToolError(f"{a.name} already exists as {', '.join(elsewhere)}; write it there (or move it first)")
        if self.wrote is not None:
            self.wrote(a.path)  # recorded before the write: a crash in between still rolls it back
        try:
            safeopen.write(self.app.config, a.path, content, self.app.config.runs.max_artifact_bytes)
        except ArtifactError as e:
            raise ToolError(str(e)) from None
        self.written.append(a.path)
        return f"wrote {a.path} ({len(content.encode())} bytes); it is committed when your run ends successfully"

    def tool_move_artifact(self, artifact: str, state: str, reason: str = "") -> str:
        req = MoveRequest(artifact, state, self.role.name, reason, notified_by="run-role")
        result = move(self.app, req, self.transport, self.journal, owned=lambda p: p in self.written)
        if result.commit is None:
            return f"{result.before.path} is already in {state}/ (nothing to move)"
        self.moved.append(result.after.path)
        said: list[str] = []
        announce(
            self.app,
            result.before,
            result.after,
            result.commit,
            result.subject,
            self.role.name,
            self.transport,
            said.append,
        )
        return (
            f"moved {result.before.path} → {result.after.path} (commit {result.commit[:10]}); "
            + (f"{said[-1]}; " if said else "")
            + move_tells(self.app.config)
        )

    # -- the run

    def tool_whoami(self) -> str:
        role, config = self.role, self.app.config
        can = "read artifacts and your mail" if self.read_only else "read, write and move artifacts"
        if self.may_send:
            can += ", send workflow mail"
        handed = ", ".join(self.handed) if self.handed else "none"
        return (
            f"You are {role.name} <{role.name}@{config.domain}> ({role.mode} role) in {config.project_dir}.\n"
            f"Mail handed to this run: {handed}.\nYou may {can}"
            + (" (this session is read-only: an independent review)" if self.read_only else "")
            + '.\nWhen your work is done call finish(status="done", summary=...); if you cannot do it, '
            'finish(status="failed", summary=why). Nothing of the run is kept without finish("done").'
        )

    def tool_finish(self, status: str, summary: str = "") -> str:
        if status not in STATUSES:
            raise ToolError(f"finish: status must be one of {', '.join(STATUSES)}, got {status!r}")
        if not isinstance(summary, str):
            raise ToolError("finish: summary must be a string")
        if self.finished is not None:  # the first word stands: a run said failed is not done after all
            raise ToolError(f"finish: this run has finished already ({self.finished[0]}); stop now")
        self.finished = (status, summary[:MAX_SUMMARY])
        if status == "done":
            return "finished: done. Everything your run did is kept when you exit; stop now."
        return "finished: failed. Nothing of your run is kept and your mail goes to a later run; stop now."

    # -- mail

    def tool_send_message(
        self,
        event: str,
        artifact: str,
        to: list[str] | str,
        variables: dict[str, str] | None = None,
        in_reply_to: str | None = None,
    ) -> str:
        if not self.may_send:
            raise ToolError(f"{self.role.name} does not send mail (a {self.role.mode} role); tell the human instead")
        recipients = tuple(split_list(to) if isinstance(to, str) else [str(t) for t in to])
        vars_ = {str(k): str(v) for k, v in (variables or {}).items()}
        req = NotifyRequest(event, (artifact,), recipients, self.role.name, in_reply_to or None, vars_, named=True)
        composed = self.app.compose(req)
        composed.send(self.transport)  # the run's transport checks it now and keeps it until the run ends
        self.sent.append(composed.message_id)
        return f"{event} to {', '.join(composed.recipients)} accepted as {composed.message_id}; it is sent when your run ends"

    def tool_list_inbox(self) -> str:
        boxes = self.app.roster.mailboxes_of(self.role.name)
        with self.app.index() as index:
            index.refresh(boxes)
            rows = select(index, boxes)
        return render_inbox(
            self.role.name, group(rows), True, Resolver(self.app.config).now, domain=self.app.config.domain
        )

    def tool_read_thread(self, message_id: str, part: int | None = None) -> str:
        if not isinstance(message_id, str):
            raise ToolError(f"read_thread: message_id must be a Message-ID like <left@right>, got {message_id!r}")
        boxes, sent = self.app.roster.view(self.role.name)
        mid = normalize_msgid(message_id)
        with self.app.index() as index:
            index.refresh(boxes)
            rows = thread_rows(index, boxes, mid, sent)
        if not rows:
            raise ToolError(f"no thread {message_id} in your mail")
        if part is None:
            return render_thread(
                rows,
                self.app.config.mail_root,
                boxes,
                "read_thread(message_id=ITS MESSAGE-ID, part=N)",
                domain=self.app.config.domain,
            )
        mine = next((r for r in rows if r.message_id == mid), None)
        raw = read_row(self.app.config.mail_root, mine) if mine is not None else None
        if raw is None:
            raise ToolError(f"no message {message_id} in your mail")
        found, text = part_text(raw, part)  # MessageError (a WorkflowError) names a bad part
        return f"# Attachment {found.line()} of {mid}\n{text}"
