"""Demo: the design's Examples 1 and 2 (docs/roles-and-panels.md) in a scratch project — real Maildirs,
a real SMTP server, agentd and a review panel; no API key, no network."""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from workflow.agentd.daemon import Agentd
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.agents.backends.scripted import dumps
from workflow.app import App
from workflow.artifacts.board import cards, render
from workflow.artifacts.gitcmd import run_git
from workflow.bridges.sections import SECTIONS
from workflow.core.config import load_config
from workflow.core.errors import WorkflowError
from workflow.core.locate import Resolver
from workflow.delivery.credentials import client_credential
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import SmtpTransport
from workflow.mail.inbox import group, render_inbox, render_thread, select, thread_rows
from workflow.ops.scaffold import init
from workflow.panels.review import dumps_status, run_panel, status_rows

DEMO_TOML = """\
# A scratch workflow-mail project made by `workflow demo`.
[workflow]
domain = "workflow.local"
mail_root = "mail"
backend = "scripted"   # the demo's agents follow TOML scripts: no model, no key

[smtp]
port = {port}   # the demo's own server (a free port picked for this run)

[agentd]
roles = ["spec-reviewer"]   # the demo wakes only the reviewer
rescan = 1

[panels.spec-writer-panel]
members = ["claude", "gpt-5", "gemini"]
primary = "claude"

[panels.spec-reviewer-panel]
members = ["claude", "gpt-5", "gemini"]
consensus = "majority"
"""

SPEC = """\
# User authentication

Users sign in with email and password or OAuth 2.0; sessions are bearer tokens.

## Error handling
- Wrong password: 401 with a generic message; lock after 5 failures in 10 minutes.
"""


REVIEWER_SCRIPT = dumps(
    [
        {"tool": "read_artifact", "path": "specs/*/user-auth.md"},
        {
            "tool": "move_artifact",
            "artifact": "user-auth",
            "state": "todo",
            "reason": "Complete, testable, errors covered",
        },
        {
            "tool": "send_message",
            "event": "approval",
            "artifact": "specs/*/user-auth.md",
            "to": ["spec-writer"],
            "in_reply_to": "$first",
            "variables": {"NEXT_STATE": "todo"},
        },
        {"say": "Approved user-auth: moved to todo/; its hand-off copies skeleton-writer and test-writer."},
    ]
)


SEARCH_SPEC = """\
# Search

Users search specs by title and body; results are ranked by recency.
"""
PANEL_VERDICTS = {
    "claude": "Clear scope, testable ranking rule.\nVERDICT: approve",
    "gpt-5": "Good enough for a first cut; ranking could mention ties.\nVERDICT: approve",
    "gemini": "No error cases: what happens on an empty query or a malformed one?\nVERDICT: reject",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scaffold(base: Path, port: int = 0) -> Path:
    """A scratch project: `workflow init`, a local git identity, the spec committed in proposed/."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "workflow.toml").write_text(DEMO_TOML.replace("{port}", str(port)), encoding="utf-8")
    if not (base / ".gitignore").exists():
        (base / ".gitignore").write_text("mail/\n", encoding="utf-8")
    init(base)
    for key, value in (("user.name", "workflow demo"), ("user.email", "demo@workflow.local")):
        run_git(["config", key, value], base)
    (base / "scripted").mkdir(exist_ok=True)
    (base / "scripted" / "spec-reviewer.toml").write_text(REVIEWER_SCRIPT, encoding="utf-8")
    for member, answer in PANEL_VERDICTS.items():
        (base / "scripted" / f"spec-reviewer-panel.{member}.toml").write_text(
            dumps([{"say": answer}]), encoding="utf-8"
        )
    spec = base / "specs" / "proposed" / "user-auth.md"
    if not any((base / "specs").glob("*/user-auth.md")):
        spec.write_text(SPEC, encoding="utf-8")
        (base / "specs" / "proposed" / "search.md").write_text(SEARCH_SPEC, encoding="utf-8")
        run_git(["add", "-A", "."], base)
        run_git(["commit", "-q", "-m", "spec-writer: propose user-auth"], base)
    return base


def run_demo(directory: Path | None, echo: Callable[[str], None]) -> App:
    port = free_port()
    base = scaffold(directory or Path(tempfile.mkdtemp(prefix="workflow-demo-")), port)
    app = App(load_config(base / "workflow.toml", env={}, plugins=SECTIONS))
    with BackgroundServer(app.config, app.deliverer, port=port) as port:
        echo(f"Scratch project: {base}\nMail root:       {app.config.mail_root}")
        echo(f"SMTP server:     127.0.0.1:{port} (workflow smtpd, started for the demo)\n")
        socket = str(app.config.state.socket)
        _scenario(app, base, SmtpTransport(socket, 30.0, client_credential(mail_root=app.config.mail_root)), echo)
    return app


def _agentd_until_reviewed(app: App, echo: Callable[[str], None]) -> None:
    """Run agentd (as `workflow up` does, beside the demo's server) until the reviewer's run ends."""
    daemon = Agentd(app, app.config.agentd._replace(backend="scripted"), lambda line: echo("  agentd: " + line))
    thread = threading.Thread(target=daemon.run, name="agentd", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            with Tasks(app.config.state.tasks) as tasks:
                done = [t for t in tasks.list((TaskStatus.COMPLETED, TaskStatus.FAILED)) if t.role == "spec-reviewer"]
            if done:
                break
            time.sleep(0.1)
        else:
            raise WorkflowError("agentd did not run the reviewer within 60 s")
    finally:
        daemon.stop.set()
        daemon.wake.set()
        thread.join(timeout=60)
    log = app.config.state.runs / f"task-{done[0].id}.log"
    if log.exists():
        echo("  run-role --with-email spec-reviewer (spawned by agentd):")
        echo("    " + log.read_text(encoding="utf-8").strip().replace("\n", "\n    "))
    if done[0].status != TaskStatus.COMPLETED:
        raise WorkflowError(f"the reviewer's run failed: {done[0].error}")


def _scenario(app: App, base: Path, transport: SmtpTransport, echo: Callable[[str], None]) -> None:

    def notify(sender: str, event: str, artifact: str, to: str, reply: str | None = None, **vars: str) -> str:
        shown = " ".join(f'{k}="{v}"' for k, v in vars.items())
        irt = f' --in-reply-to "{reply}"' if reply else ""
        echo(f"$ WORKFLOW_ROLE={sender} workflow-notify{irt} {event} {artifact} {to} {shown}".rstrip())
        req = NotifyRequest(event, (artifact,), tuple(to.split(",")), sender, reply, dict(vars))
        c = app.compose(req)
        c.send(transport)
        echo(f"  → {c.message_id}\n")
        return c.message_id

    def show_inbox(role: str) -> None:
        echo(f"$ workflow inbox {role}")
        boxes = app.roster.mailboxes_of(role)
        with app.index() as index:
            index.refresh(boxes)
            echo(
                render_inbox(
                    role, group(select(index, boxes)), True, Resolver(app.config).now, domain=app.config.domain
                )
            )

    echo("== Example 1: spec-writer asks for a review ==\n")
    request = notify(
        "spec-writer",
        "review-request",
        "specs/proposed/user-auth.md",
        "spec-reviewer",
        CONTEXT="Focus on error handling patterns",
    )
    show_inbox("spec-reviewer")

    echo("== Example 2: the reviewer asks for a clarification mid-review; the writer answers ==\n")
    clarify = notify(
        "spec-reviewer",
        "clarification-request",
        "specs/proposed/user-auth.md",
        "spec-writer",
        request,
        QUESTION="Should OAuth tokens expire or use refresh pattern?",
        BLOCKING="no",
    )
    notify(
        "spec-writer",
        "answer",
        "specs/proposed/user-auth.md",
        "spec-reviewer",
        clarify,
        CONTEXT="Use refresh token pattern per OAuth 2.0 spec. Will update spec to clarify.",
    )

    echo("== The server checks state claims: an approval claiming todo/ before the move is refused ==\n")
    try:
        notify(
            "spec-reviewer",
            "approval",
            "specs/todo/user-auth.md",
            "spec-writer",
            None,
            NEXT_STATE="todo",
            NEXT_ROLES="skeleton-writer,test-writer",
        )
    except WorkflowError as e:
        echo(f"  refused: {e}\n")

    echo("== Example 1 (cont.): the reviewer's agent runs (scripted backend): approves, moves, notifies ==\n")
    echo(f"$ cat scripted/spec-reviewer.toml\n{REVIEWER_SCRIPT}")
    echo("$ workflow up   # smtpd is already up for the demo; agentd starts and wakes the reviewer,")
    echo("                # whose unread review-request and answer are trigger mail")
    _agentd_until_reviewed(app, echo)
    echo("")
    echo("$ git log --stat -1")
    log = run_git(["log", "--stat", "-1", "--format=%h %s%n%n%b"], base).strip().splitlines()
    echo("\n".join("  " + line for i, line in enumerate(log) if line or (i and log[i - 1])) + "\n")

    for role in ("spec-writer", "spec-reviewer", "skeleton-writer", "test-writer"):
        show_inbox(role)

    echo("$ workflow status")
    with app.index() as index:
        index.refresh()
        rows = index.with_artifacts()
    echo(render(app.config, cards(app.config, rows)) + "\n")

    echo(f"$ workflow thread '{request}' --as spec-writer")
    boxes, sent = app.roster.view("spec-writer")
    with app.index() as index:
        echo(
            render_thread(
                thread_rows(index, boxes, request, sent), app.config.mail_root, boxes, domain=app.config.domain
            )
        )

    echo(
        "== A review panel: three models review search.md independently (sealed), disagree 2–1, speak with one voice ==\n"
    )
    notify(
        "spec-writer",
        "review-request",
        "specs/proposed/search.md",
        "spec-reviewer-panel",
        CONTEXT="Is the ranking rule enough?",
    )
    echo(
        "$ workflow panel review spec-reviewer-panel   (members on the scripted backend: claude, gpt-5 approve; gemini rejects)"
    )
    panel = app.config.panel("spec-reviewer-panel")
    assert panel is not None
    run_panel(app, panel, transport, lambda t: echo("  " + t))
    echo("\n$ workflow panel status search")
    echo(dumps_status(status_rows(app, "search")) + "\n")
    show_inbox("spec-writer")

    echo("== Visibility: a writer may not post into the reviewer panel's internal space ==\n")
    try:
        notify(
            "spec-writer",
            "question",
            "specs/*/user-auth.md",
            "spec-reviewer-panel-internal",
            QUESTION="What do you think so far?",
        )
    except WorkflowError as e:
        echo(f"  refused: {e}\n")
    echo(
        f"Done. Look around: ls {app.config.mail_root}/*/new  ·  WORKFLOW_CONFIG={base / 'workflow.toml'} workflow roster\n"
        f"In a browser: cd {base} && workflow web   (open the one-time login link it prints; `workflow web login` prints another)"
    )
