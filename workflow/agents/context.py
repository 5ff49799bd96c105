"""Context: the prompt a role's run starts from — built only from its own mailbox and the repository.

Everything the agent needs is inlined, so it discovers nothing by tool calls (docs/agentd.md).
The role prompt; what the role may do (events, moves, tools); the new messages with their
thread ancestry as a transcript (only rows the role may see: its own mailboxes and the mail
it sent); the artifacts they reference, resolved through globs to where they are now.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from workflow.agents.tools import SCHEMAS
from workflow.app import App
from workflow.artifacts.announce import move_tells
from workflow.artifacts.move import role_moves
from workflow.core import safeopen
from workflow.core.errors import ArtifactError
from workflow.core.locate import Resolver, locate
from workflow.mail.inbox import group, render_thread, thread_rows
from workflow.mail.index import Index
from workflow.mail.rows import Row
from workflow.policy.roles import Role

MAX_ARTIFACT = 60_000
NAMES = tuple(s["name"] for s in SCHEMAS)
PART_HOW = dict.fromkeys(
    ("tools", "mcp"), "read_thread(message_id=ITS MESSAGE-ID, part=N)"
)  # a shell agent: listed only


class Context(NamedTuple):
    prompt: str
    messages: tuple[Row, ...]  # the new mail handed to the run
    artifacts: tuple[str, ...]  # current paths inlined


def may_do(app: App, role: Role, how: str = "tools") -> str:
    """What the role may do, and how: by its tools (``tools``: an API agent; ``mcp``: an agent
    CLI given them by ``workflow mcp``), or by the shell lines of the commands it really has
    (``shell``: an agent CLI with only a shell); and how it ends its run."""
    moves = role_moves(app.roster, role.name)
    mv = "any legal move" if moves is None else (", ".join(f"{a} → {b}" for a, b in moves) or "none")
    lines = [
        "# What you may do",
        f"- You are {role.name} ({role.mode}); you write as {app.roster.address(role.name)}.",
        f"- Events you can send: {', '.join(app.config.event_types)} (approvals and rejections only "
        "if you are a reviewer). Reply in a thread with in_reply_to; a new review cycle is a new thread.",
        f"- Moves you own: {mv} ({move_tells(app.config)}). Legal transitions: "
        + ", ".join(f"{a} → {b}" for a, b in sorted(app.config.transitions))
        + ".",
        f"- Artifacts live in {', '.join(f'{r}/' for r in app.config.artifact_roots)} under the state folders "
        f"{', '.join(app.config.states)}; a glob like specs/*/name.md finds one wherever it is.",
        f"- Tools: {', '.join(NAMES)}"
        + (" (from the MCP server `workflow`; use them for mail and moves, not the shell)" if how == "mcp" else "")
        + ". Messages you send go out when your run ends successfully; a refused call tells you why.",
        '- When your work is done, call finish(status="done", summary=WHAT YOU DID); if you cannot do it, '
        'finish(status="failed", summary=WHY). Without finish("done") nothing you did is kept and your '
        "mail goes to a later run.",
    ]
    if how == "shell":
        lines.pop()
        lines[-1] = "\n".join(
            [
                "- You work from the shell, in the project's directory; your run gives you your role and "
                "credential (never name another role). Read and edit artifacts as files. Mail and moves:",
                "  - send: `workflow-notify [--in-reply-to MESSAGE-ID] EVENT ARTIFACT TO [KEY=VALUE…]`, e.g. "
                "`workflow-notify --in-reply-to '<id@domain>' approval specs/proposed/x.md spec-writer "
                "NEXT_STATE=todo` (`workflow-notify --help` lists the events' variables)",
                f"  - move: `workflow move ARTIFACT STATE --as {role.name} --reason TEXT`, e.g. `workflow move x "
                f"todo --as {role.name} --reason 'complete and testable'`",
                "  - mail that arrives while you work is appended to the file `$WORKFLOW_NEW_MAIL`.",
                "- A command that is refused exits non-zero and says why: read it, and do not pretend it "
                "worked. Messages you send go out when your run ends successfully.",
                "- When your work is done, run `workflow finish done 'WHAT YOU DID'`; if you cannot do it, "
                "`workflow finish failed 'WHY'`. Without `workflow finish done` nothing you did is kept and "
                "your mail goes to a later run.",
            ]
        )
    if not role.takes_mail:
        lines.append("- You never send mail: when the draft is ready, the human decides about the review-request.")
    return "\n".join(lines)


def build(
    app: App, role: Role, index: Index, new: Sequence[Row], artifact: str | None = None, how: str = "tools"
) -> Context:
    """The whole prompt for one run (``how`` the agent acts: ``may_do``)."""
    boxes, sent = app.roster.view(role.name)
    parts = [f"# Role: {role.name}", "", role.prompt.strip(), "", may_do(app, role, how), ""]
    if artifact:
        parts += ["# Your task", f"Process {artifact} now: do your job for it, send what it needs, then stop.", ""]
    threads = group(new)
    if threads:
        n = len(new)
        parts.append(
            f"# New mail ({n} message{'s' if n != 1 else ''} in {len(threads)} thread{'s' if len(threads) != 1 else ''}; NEW marks unread)"
        )
        parts.append("")
        for t in threads:
            seed = t.messages[-1].message_id or ""
            rows = thread_rows(index, boxes, seed, sent) if seed else list(t.messages)
            thread = render_thread(
                rows or list(t.messages), app.config.mail_root, boxes, PART_HOW.get(how, ""), domain=app.config.domain
            )
            parts.append(thread.replace("# Thread:", "## Thread:", 1))
            parts.append("")
    else:
        parts += ["# New mail", "None.", ""]
    resolver = Resolver(app.config)
    refs = list(dict.fromkeys([a for r in new for a in r.artifacts] + ([artifact] if artifact else [])))
    shown: list[str] = []
    texts: list[str] = []
    for ref in refs:
        for a in locate(ref, app.config, resolver.artifacts):
            if a.path in shown:
                continue
            shown.append(a.path)
            try:
                data, total = safeopen.read_sized(app.config, a.path, MAX_ARTIFACT + 1)
            except (ArtifactError, OSError) as e:
                texts.append(f"## {a.path} — not shown: {e}\n")
                continue
            text = data[:MAX_ARTIFACT].decode("utf-8", "replace")
            more = f"\n[… {total - MAX_ARTIFACT} more bytes: read_artifact {a.path}]" if total > MAX_ARTIFACT else ""
            note = f" (mail named {ref})" if ref != a.path else ""
            texts.append(f"## {a.path} — now in {a.state}/{note}\n\n````\n{text.rstrip()}{more}\n````\n")
    parts.append("# Artifacts referenced")
    parts.append("")
    parts.extend(texts or ["None found in the repository.\n"])
    return Context("\n".join(parts).rstrip() + "\n", tuple(new), tuple(shown))
