"""Notify: turn ``workflow-notify EVENT ARTIFACT TO [KEY=VALUE…]`` into a threaded workflow message.

Composition only: resolves recipients through the roster, derives the state from the artifact's
folder (or NEXT_STATE for approvals), copies an approval to NEXT_ROLES (else to the sender role's
``hands_off``: the one hand-off every decision uses, by mail, button, panel or agent), threads replies onto their parent when the index knows it,
renders the event's template and builds the bytes. Sending is the transport's job.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from workflow.core import events
from workflow.core.config import Config
from workflow.core.errors import MessageError
from workflow.core.locate import has_glob
from workflow.mail.index import Index
from workflow.mail.message import (
    Draft,
    build,
    make_message_id,
    normalize_msgid,
    reply_subject,
    validate_artifact,
)
from workflow.mail.templates import parse_vars, render
from workflow.policy.roster import Roster

if TYPE_CHECKING:
    from workflow.delivery.transport import Transport


@dataclass(frozen=True)
class NotifyRequest:
    event: str
    artifacts: tuple[str, ...]
    to: tuple[str, ...]
    sender: str
    in_reply_to: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()  # extra X- headers (a panel member's X-Review-Verdict)


@dataclass(frozen=True)
class Composed:
    raw: bytes
    message_id: str
    sender_address: str
    recipients: tuple[str, ...]

    def send(self, transport: Transport) -> str:
        """Hand the message to ``transport``; returns where it went."""
        return transport.send(self.raw, self.sender_address, self.recipients)


def artifact_state(path: str, config: Config) -> str | None:
    """The state folder a path names, or the one a glob resolves to in the project."""
    for part in PurePosixPath(path).parts[:-1]:
        if part in config.states:
            return part
    if has_glob(path):
        found = sorted(Path(config.project_dir).glob(path))
        states = {p.parent.name for p in found if p.parent.name in config.states}
        if len(states) == 1:
            return states.pop()
    return None


def request(
    event: str, artifact: str, to: str, sender: str, in_reply_to: str | None, pairs: Sequence[str]
) -> NotifyRequest:
    """A notification as ``workflow-notify EVENT ARTIFACT TO [KEY=VALUE]…`` gives it: ARTIFACT and
    TO may list several, separated by commas. The same for the command and the server's XNOTIFY."""
    return NotifyRequest(
        event=event,
        artifacts=tuple(x for x in artifact.split(",") if x.strip()),
        to=tuple(split_list(to)),
        sender=sender,
        in_reply_to=in_reply_to or None,
        variables=parse_vars(list(pairs)),
    )


def split_list(value: str) -> list[str]:
    return [v.strip() for v in re.split(r"[,\s]+", value) if v.strip()]


Parent = Callable[[str], "tuple[list[str], str] | None"]  # a Message-ID → its References and Subject


def parent_in(index: Index) -> Parent:
    """Parents as the index knows them (the owner's processes)."""

    def parent(message_id: str) -> tuple[list[str], str] | None:
        rows = index.query(message_ids=[message_id])
        # its ancestry: References, and In-Reply-To when a client wrote only that (msmtp, by hand)
        return (rows[0].ancestry, rows[0].subject) if rows else None

    return parent


def unblockers(roster: Roster, event: str, artifact: str, sender: str) -> list[str]:
    """The roles a report about ``artifact`` (in blocked/: the "unblockers" rule) is copied to: every
    mail-taking role triggered by the event whose artifact globs match, so the one that answers (the
    platform-lead of docs/roles-and-panels.md's Example 3) has the report it replies to."""
    out = []
    for name in roster.roles:
        role = roster.roles[name]
        if name != sender and role.takes_mail and event in role.triggers:
            if any(fnmatch.fnmatchcase(artifact, g) for g in role.artifacts):
                out.append(name)
    return out


def compose(req: NotifyRequest, config: Config, roster: Roster, parent: Parent) -> Composed:
    """Build the message for one notification; raises a WorkflowError naming any problem.
    ``parent`` threads a reply: it knows the References and Subject of the message replied to."""
    if req.event not in config.event_types:
        raise MessageError(f"unknown event type {req.event!r}; expected one of {', '.join(config.event_types)}")
    sender = roster.sender(req.sender)
    artifacts = tuple(validate_artifact(a) for a in req.artifacts)
    if not artifacts:
        raise MessageError("no artifact given")
    to = [roster.route(t) for t in req.to]
    if not to:
        raise MessageError("no recipient given")
    cc: list[str] = []
    next_roles: list[str] = []
    rules = events.get(req.event).rules
    if "next-roles" in rules:
        named = req.variables.get("NEXT_ROLES")  # an explicit NEXT_ROLES overrides the sender's hand-off
        for name in split_list(named) if named is not None else roster.hands_off(sender):
            r = roster.route(name)
            next_roles.append(roster.local_part(name)[0])
            if r.address not in {t.address for t in to} and r.address not in cc:
                cc.append(r.address)
    state = artifact_state(artifacts[0], config)
    if "unblockers" in rules and state == "blocked" and not req.in_reply_to:
        for name in unblockers(roster, req.event, artifacts[0], sender):  # whoever can answer sees the report
            address = roster.address(name)
            if address not in {t.address for t in to} and address not in cc:
                cc.append(address)
    if "next-state" in rules and "NEXT_STATE" in req.variables:
        state = req.variables["NEXT_STATE"].strip()
    if state is not None and state not in config.states:
        raise MessageError(f"NEXT_STATE {state!r} is not a state; expected one of {', '.join(config.states)}")
    now = datetime.now(UTC)
    message_id = make_message_id(sender, config.domain, now)
    references: list[str] = []
    parent_subject: str | None = None
    in_reply_to = normalize_msgid(req.in_reply_to) if req.in_reply_to else None
    if in_reply_to:
        known = parent(in_reply_to)
        if known is not None:
            references, parent_subject = known
        if in_reply_to not in references:
            references.append(in_reply_to)
    variables = dict(req.variables)
    if next_roles:
        variables.setdefault("NEXT_ROLES", ",".join(next_roles))  # a hand-off the body names too
    variables.update(
        FROM_ROLE=sender,
        TO_ROLE=", ".join(roster.local_part(t)[0] for t in req.to),
        ARTIFACT_PATH=artifacts[0],
        ARTIFACT_NAME=PurePosixPath(artifacts[0]).stem,
        WORKFLOW_STATE=state or "unknown",
        DATE=format_datetime(now),
        MESSAGE_ID=message_id,
    )
    rendered = render(req.event, variables, config.templates_dir)
    subject = rendered.subject
    if in_reply_to:
        subject = reply_subject(parent_subject if parent_subject is not None else subject)
    sender_address = roster.address(sender)
    draft = Draft(
        sender=sender_address,
        to=[t.address for t in to],
        cc=cc,
        subject=subject,
        body=rendered.body,
        message_id=message_id,
        event=req.event,
        state=state,
        artifacts=artifacts,
        next_roles=next_roles,
        in_reply_to=in_reply_to,
        references=references,
        date=now,
        extra=[*rendered.headers, *req.headers],
    )
    raw = build(draft)
    return Composed(raw, message_id, sender_address, tuple([t.address for t in to] + cc))
