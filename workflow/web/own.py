"""Own acts: what a person does in the cockpit besides deciding — as their role, through the same
library calls and rules as the CLI, each answered with an ``actions.Done``.

* ``move_card`` — a card dragged to a state (or its "move to" form): ``workflow move ARTIFACT
  STATE --as ROLE`` — the transition graph and the role's own moves checked, one commit authored
  as the role; told as the CLI tells it (``--notify ROLE`` when the person names one, else the
  post-commit hook's announcement). An illegal move is refused with the rule's text, and nothing
  moves.
* ``new_request`` — a review-request or a question to a role the person picks, about an artifact
  they pick or write here (its text into ``ROOT/proposed/NAME.md``, committed as their role as a
  run's edits are, ``artifacts.edits``). The mail is composed and sent as ``workflow notify``
  sends it: the rules judge it at delivery, and a refusal names its rule.
* ``reply`` — the person's reply in a thread, ``In-Reply-To`` the message, typed as the server
  types a person's plain mail (``delivery.plain``): an ``answer`` to a question, clarification
  request or blocker-report they received; else a ``question`` — to the requester in a
  review-request's thread, to the sender otherwise (to the others it went to, when they sent it).
"""

from __future__ import annotations

import re

from workflow.app import App
from workflow.artifacts import edits, transitions
from workflow.artifacts.move import MoveRequest, move
from workflow.core import beneath, events, safeopen
from workflow.core.errors import WorkflowError
from workflow.core.locate import Artifact, locate, parse_path
from workflow.core.senders import local_part
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.web import actions, pages
from workflow.web.actions import Done

REQUESTS = ("review-request", "question")  # what a new request may be
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
MAX_ARTIFACT = 256 * 1024  # the most a person writes into a new artifact from the form
ILLEGAL = "illegal transition"


def _refused(e: WorkflowError) -> Done:
    done = actions._refused(e)
    if not done.rule and str(e).startswith(ILLEGAL):
        return done._replace(rule="[artifacts] transitions")  # the graph's rule, as its text ends
    return done


def _role(app: App, name: str) -> str:
    """A role, panel or member to send to or tell (refusing any other name)."""
    if not name or not ({name} & {*app.roster.roles, *app.roster.panels, *app.roster.members}):
        raise WorkflowError(f"no role {name!r} to send to")
    return name


def targets(app: App, state: str) -> list[str]:
    """The states a card in ``state`` may be moved to by the graph (the "move to" choices)."""
    return transitions.targets(app.config, state)


def move_card(app: App, role: str, path: str, state: str, reason: str = "", tell: str = "") -> Done:
    """``workflow move PATH STATE --as ROLE [--reason …] [--notify TELL]``."""
    try:
        to = (_role(app, tell),) if tell else ()
        req = MoveRequest(path, state, role, actions._clean(reason), to)
        res = move(app, req, make_transport(app.config, app.deliverer))
    except WorkflowError as e:
        return _refused(e)
    if not res.commit:
        return Done(True, f"{res.before.path} stays in {res.before.state}/ (nothing to commit)")
    said = f"moved {res.before.path} → {res.after.path} (commit {res.commit[:10]}: {res.subject})"
    if res.error:
        return Done(True, f"{said}; the notification is not sent yet ({res.error}), kept in the outbox")
    return Done(True, said + (f"; {res.sent}" if res.sent else ""))


def artifacts(app: App) -> list[Artifact]:
    """Every artifact in the tree, by path (the ones a new request may be about)."""
    found = {a.path: a for root in app.config.artifact_roots for a in locate(f"{root}/*/*", app.config)}
    return [found[p] for p in sorted(found)]


def write(app: App, role: str, root: str, name: str, text: str) -> str:
    """A new artifact ``ROOT/proposed/NAME.md`` with ``text``, committed as ``role``; its path."""
    if root not in app.config.artifact_roots:
        raise WorkflowError(f"no artifact root {root!r}; expected one of {', '.join(app.config.artifact_roots)}")
    name = name.strip().removesuffix(".md")
    if name.endswith(".md"):
        raise WorkflowError(f"name {name}.md: give the name once, without .md (like user-auth)")
    if not NAME.fullmatch(name):
        raise WorkflowError(f"name {name!r}: lower-case letters, digits, '.', '_' and '-', up to 80, like user-auth")
    a = parse_path(f"{root}/proposed/{name}.md", app.config)
    if a is None:
        raise WorkflowError(f"{root}/proposed/{name}.md is not an artifact path")
    there = [x.path for x in locate(a.glob, app.config)]
    if there:
        raise WorkflowError(f"{name} exists already as {', '.join(there)}: pick it instead")
    body = text.replace("\r\n", "\n").strip()
    if not body:
        raise WorkflowError("the artifact is empty: write its text")
    safeopen.write(app.config, a.path, body + "\n", MAX_ARTIFACT)
    try:
        told = "a person's new artifact: their request says what it is"
        done = edits.commit(app.config, app.roster.identity(role), [a.path], "propose", told)
    except WorkflowError:
        beneath.remove(app.config.project_dir, a.path)  # not committed: not left behind
        raise
    if done.sha is None:
        raise WorkflowError(f"{a.path} was not committed")
    return a.path


def new_request(app: App, role: str, f: dict[str, str]) -> Done:
    """A review-request or question (``f["event"]``) to ``f["to"]`` about the artifact picked
    (``f["path"]``) or written (``f["name"]``, ``f["text"]`` in ``f["root"]``)."""
    event = f.get("event", "")
    if event not in REQUESTS:
        return Done(False, f"a new request is a {' or a '.join(REQUESTS)}, not {event!r}")
    note = actions._clean(f.get("note", ""))
    if event == "question" and not note:
        return Done(False, "write the question")
    wrote = ""
    try:
        to = _role(app, f.get("to", ""))
        if f.get("name", "").strip():
            path = write(app, role, f.get("root", app.config.artifact_roots[0]), f["name"], f.get("text", ""))
            wrote = f"wrote {path} (committed as {role}); "
        else:
            path, wrote = actions._one(app, (f.get("path", ""),)).path, ""
        var = events.get(event).reason
        composed = app.compose(NotifyRequest(event, (path,), (to,), role, None, {var: note} if note else {}))
        composed.send(make_transport(app.config, app.deliverer))
    except WorkflowError as e:
        done = _refused(e)
        return done._replace(text=f"{wrote}{done.text}")
    return Done(True, f"{wrote}{event} about {path} sent to {to} ({composed.message_id})")


def reply(app: App, role: str, message_id: str, text: str) -> Done:
    """``role``'s reply to ``message_id`` (a message of its view), typed as plain mail is."""
    text = actions._clean(text)
    if not text:
        return Done(False, "the reply is empty: write it")
    found = pages.message(app, role, message_id)
    if found is None:
        return Done(False, f"{message_id} is not in {role}'s mail")
    row = found[0]
    boxes = set(app.roster.mailboxes_of(role))
    sender = local_part(row.sender, app.config.domain)
    if sender is not None and sender not in boxes:
        to: tuple[str, ...] = (sender,)
    else:  # their own message: to the others it went to
        others = (local_part(r, app.config.domain) for r in row.recipients)
        to = tuple(dict.fromkeys(r for r in others if r is not None and r not in boxes))
    if not to:
        return Done(False, f"{message_id} is from {row.sender}: no role to reply to")
    received = row.mailbox in boxes and sender not in boxes
    event, var = ("answer", "ANSWER") if received and row.event in events.WAITING else ("question", "QUESTION")
    refs = tuple(_now(app, r) for r in row.artifacts) or (app.config.any_artifact,)
    try:
        composed = app.compose(NotifyRequest(event, refs, to, role, message_id, {var: text}))
        composed.send(make_transport(app.config, app.deliverer))
    except WorkflowError as e:
        return _refused(e)
    return Done(True, f"{event} sent to {', '.join(to)} in the thread ({composed.message_id})")


def _now(app: App, ref: str) -> str:
    """Where the artifact ``ref`` names is now (a reply in a thread about a moved artifact claims
    its state now, not the one the thread's first mail recorded); ``ref`` itself when it is not one."""
    found = locate(ref, app.config)
    return found[0].path if len(found) == 1 else ref
