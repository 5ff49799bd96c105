"""Interactive: ``run-role -i`` — a terminal session between a human and a role's agent; no mail.

Sync helper roles (``*-writing-helper``) work only this way. Each line the human types is a
turn; ``/done`` asks the agent for the final draft, writes it to ``ROOT/proposed/NAME`` and
offers to send the review-request (from the human, to the matching reviewer); ``/quit`` leaves
without writing. The helper itself never sends mail.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from workflow.agents.backends import RunInput, chosen, make_backend
from workflow.agents.backends.scripted import ScriptedBackend
from workflow.agents.context import may_do
from workflow.agents.tools import RoleTools
from workflow.app import App
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport


def session(
    app: App,
    role_name: str,
    draft: str,
    *,
    transport: Transport,
    read: Callable[[str], str],
    echo: Callable[[str], None],
    backend: str | None = None,
    script: Path | None = None,
) -> str | None:
    """Run the session; returns the path written, or None when the human quit."""
    role = app.roster.roles[role_name] if role_name in app.roster.roles else None
    if role is None:
        app.roster.identity(role_name)
        raise AssertionError("unreachable")
    root = app.config.artifact_roots[0]
    path = draft if "/" in draft else f"{root}/proposed/{draft if draft.endswith('.md') else draft + '.md'}"
    tools = RoleTools(app, role, transport, may_send=False)
    agent = make_backend(app.config, chosen(app.config, role.name, role.backend, backend), script)
    scripted = agent.replies(role.name) if isinstance(agent, ScriptedBackend) else None
    transcript: list[str] = []
    base = f"# Role: {role.name}\n\n{role.prompt.strip()}\n\n{may_do(app, role)}\n\nThe draft goes to {path}.\n"

    def turn(text: str) -> str:
        transcript.append(f"Human: {text}")
        if scripted is not None:
            reply = scripted.pop(0) if scripted else "(the script has no more replies)"
        else:
            res = agent.run(RunInput(role, base + "\n# Conversation so far\n\n" + "\n\n".join(transcript), tools))
            reply = res.summary if res.ok else f"(the agent failed: {res.error})"
        transcript.append(f"{role.name}: {reply}")
        return reply

    echo(f"{role.name}: interactive session for {path}. Type your answers; /done writes the draft, /quit leaves.")
    echo(turn("(the session starts)"))
    while True:
        try:
            line = read("> ").strip()
        except EOFError:
            line = "/quit"
        if line == "/quit":
            echo("left without writing anything")
            return None
        if line == "/done":
            final = turn("Write the final draft now, as the complete artifact text.")
            echo(tools.call("write_artifact", {"path": path, "content": final.rstrip() + "\n"}))
            break
        if line:
            echo(turn(line))
    to = app.roster.reviewer_of(role.name.split("-")[0])  # spec-writing-helper → the spec reviewer(s)
    answer = read(f"Send a review-request for {path} to {to} now? [y/N] ").strip().lower()
    if answer in ("y", "yes"):
        c = app.compose(
            NotifyRequest(
                "review-request",
                (path,),
                (to,),
                app.config.default_sender,
                None,
                {"CONTEXT": f"First draft written with {role.name}"},
            )
        )
        where = c.send(transport)
        echo(f"sent review-request {c.message_id} to {to} ({where})")
    else:
        echo(f"not sent; when ready: workflow-notify review-request {path} {to}")
    return path
