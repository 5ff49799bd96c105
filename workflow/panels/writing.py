"""Writing panels: a primary and helpers write an artifact section by section, then ask for review.

For each section the primary announces it on ``{panel}-internal@`` with a first proposal, every
helper contributes in that thread, and the primary records the decision (the section's text).
After the last section the primary integrates the artifact into ``ROOT/proposed/NAME``, commits
it, and the panel sends the review-request (to the review panel of the kind when there is one,
else the solo reviewer). Clarification requests and questions from reviewers arrive on
``{kind}-discussion@``; ``answer_discussion`` has the primary answer each in its thread there.
Every member works through its own backend; only panel members ever see the internal thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workflow.app import App
from workflow.artifacts.gitcmd import run_git
from workflow.core import safeopen
from workflow.core.addresses import discussion_address
from workflow.core.config import PanelConfig
from workflow.core.errors import WorkflowError
from workflow.core.locate import locate
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.mail.inbox import render_thread, thread_rows, unique
from workflow.panels.members import Spent, base_prompt, internal_note, run_member


def _run(
    app: App,
    panel: PanelConfig,
    member: str,
    prompt: str,
    transport: Transport,
    backend: str | None,
    spent: Spent | None = None,
) -> str:
    """One member's run; what it used is added to ``spent`` (the panel's run counts it, member by member)."""
    res = run_member(app, panel, member, prompt, transport, backend)
    if spent is not None:
        spent.add(member, res)
    if not res.ok:
        raise WorkflowError(f"{panel.name}.{member}'s run failed: {res.error}")
    return res.summary.strip()


def _post(
    app: App,
    panel: PanelConfig,
    member: str,
    artifact: str,
    status: str,
    text: str,
    transport: Transport,
    in_reply_to: str | None,
) -> str:
    c = app.compose(internal_note(panel, member, artifact, status, text, in_reply_to))
    c.send(transport)
    return c.message_id


def write(
    app: App,
    panel: PanelConfig,
    name: str,
    sections: Sequence[str],
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None = None,
    brief: str = "",
    spent: Spent | None = None,
) -> str:
    """Write the artifact section by section; returns its path in proposed/. What the members'
    runs used is added to ``spent``."""
    if panel.kind != "writing" or panel.primary is None:
        raise WorkflowError(f"{panel.name} is not a writing panel with a primary ([panels.{panel.name}] primary)")
    if not sections:
        raise WorkflowError("give at least one --section")
    root = app.config.artifact_roots[0]
    path = f"{root}/proposed/{name if name.endswith('.md') else name + '.md'}"
    glob = f"{root}/*/{path.rsplit('/', 1)[-1]}"
    primary = panel.primary
    helpers = [m.name for m in panel.members if m.name != primary]
    writer = base_prompt(app, panel)
    draft: list[str] = []
    for title in sections:
        so_far = "\n\n".join(draft) or "(nothing yet)"
        proposal = _run(
            app,
            panel,
            primary,
            f"{writer}\n\n# Section: {title}\nYou are the primary of {panel.name}. "
            f"Propose the section '{title}' of {path}.\n{brief}\n\n# Draft so far\n{so_far}\n",
            transport,
            backend,
            spent,
        )
        root_mid = _post(app, panel, primary, glob, f"section: {title}", proposal, transport, None)
        echo(f"{panel.name}: {primary} announced section '{title}'")
        notes = [f"{primary} proposed:\n{proposal}"]
        for h in helpers:
            contribution = _run(
                app,
                panel,
                h,
                f"{writer}\n\n# Section: {title}\nYou help {primary}, the primary of "
                f"{panel.name}. Improve on this proposal for '{title}':\n\n{proposal}\n",
                transport,
                backend,
                spent,
            )
            _post(app, panel, h, glob, f"contribution: {title}", contribution, transport, root_mid)
            notes.append(f"{h} contributed:\n{contribution}")
            echo(f"  {h} contributed")
        decided = _run(
            app,
            panel,
            primary,
            f"{writer}\n\n# Decide section: {title}\nThe thread so far:\n\n"
            + "\n\n".join(notes)
            + "\n\nWrite the final text of this section.\n",
            transport,
            backend,
            spent,
        )
        _post(app, panel, primary, glob, f"decision: {title}", decided, transport, root_mid)
        draft.append(f"## {title}\n\n{decided}")
        echo(f"  {primary} recorded the decision for '{title}'")
    if any(a.path != path for a in locate(glob, app.config)) and not safeopen.exists(app.config, path):
        raise WorkflowError(f"{glob} exists in another state folder; move it back to proposed/ first")
    title = name.rsplit("/", 1)[-1].removesuffix(".md").replace("-", " ").capitalize()
    safeopen.write(app.config, path, f"# {title}\n\n" + "\n\n".join(draft).rstrip() + "\n")
    skip = (app.config.mail_root,)
    run_git(["add", "--", path], app.config.project_dir, skip=skip)
    run_git(
        ["commit", "-q", "-m", f"{panel.name}: draft {title.lower()} ({len(sections)} sections)", "--", path],
        app.config.project_dir,
        skip=skip,
    )
    reviewer = app.roster.reviewer_of(panel.artifact_kind)
    req = NotifyRequest(
        "review-request",
        (path,),
        (reviewer,),
        panel.name,
        None,
        {
            "CONTEXT": f"Written by {panel.name} ({', '.join(m.name for m in panel.members)}), "
            f"sections: {', '.join(sections)}"
        },
    )
    c = app.compose(req)
    c.send(transport)
    echo(f"{panel.name}: integrated {path} and sent the review-request to {reviewer} ({c.message_id})")
    return path


def answer_discussion(
    app: App,
    panel: PanelConfig,
    transport: Transport,
    echo: Callable[[str], None],
    backend: str | None = None,
    spent: Spent | None = None,
) -> int:
    """The primary answers each unread clarification-request or question on the discussion address;
    what its runs used is added to ``spent``."""
    if panel.primary is None:
        raise WorkflowError(f"{panel.name} has no primary to answer for it")
    box = panel.mailbox(panel.primary)
    discussion = app.roster.address(discussion_address(panel.artifact_kind))
    with app.index() as index:
        index.refresh([box])
        rows = [
            r
            for r in unique(index.query([box], unread=True))
            if r.event in ("clarification-request", "question") and discussion in r.recipients
        ]
    n = 0
    for r in rows:
        boxes, sent = app.roster.view(box)
        with app.index() as index:
            thread = render_thread(
                thread_rows(index, boxes, r.message_id or "", sent),
                app.config.mail_root,
                boxes,
                domain=app.config.domain,
            )
        answer = _run(
            app,
            panel,
            panel.primary,
            f"{base_prompt(app, panel)}\n\n# Answer for {panel.name}\n"
            f"A reviewer asks on the discussion address. Answer it clearly.\n\n{thread}\n",
            transport,
            backend,
            spent,
        )
        req = NotifyRequest(
            "answer",
            (r.artifacts[0] if r.artifacts else app.config.any_artifact,),
            (discussion_address(panel.artifact_kind),),
            box,
            r.message_id,
            {"CONTEXT": answer},
        )
        app.compose(req).send(transport)
        app.maildirs.mark_seen(r.mailbox, r.key)
        echo(f"{panel.name}: {panel.primary} answered {r.message_id} on {discussion}")
        n += 1
    return n
