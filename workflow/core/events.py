"""Events: every built-in event type declared once — one ``EventType`` each in ``EVENTS``.

An event type's name is its ``X-Event-Type`` and its template (``email-templates/<name>.txt``).
Everything that treats event types differently reads this table and keeps none of its own: the
default ``[workflow] event_types`` (``sections``), the inbox's order (``mail.inbox``), the
coloured inbox (``cli.styled``), ``workflow move``'s notification (``artifacts.move``), reviewer
decisions (``policy.guardrails``, ``artifacts.decisions``, ``ops.doctor``) and the copy rules of
``delivery.notify``. An event type a project adds in ``[workflow] event_types`` (with its own
template) is ``get(name)``'s plain one: last in the inbox, uncoloured, a move's reason in
CONTEXT. ``workflow events`` prints the table; ``workflow doctor`` reports an event type
without a template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# What each of ``EventType.rules`` does where the message is composed (``delivery.notify``).
RULES: Mapping[str, str] = MappingProxyType(
    {
        "next-state": "NEXT_STATE becomes X-Workflow-State (workflow move passes the folder it moved to)",
        "next-roles": "the roles in NEXT_ROLES (absent: the sender role's hands_off) are copied (Cc) "
        "and listed in X-Next-Roles",
        "unblockers": "about an artifact in blocked/, not a reply: copied to every role it triggers "
        "whose artifact globs match",
        "copy": "carries the artifact's text for people, and the diff against the last reviewed version",
        "exists": "its artifact must be in the tree (workflow-notify refuses one that is not, with did-you-mean)",
    }
)
ANY = "*"  # EventType.enters: any move no other event type claims


@dataclass(frozen=True)
class EventType:
    """One event type: how the inbox, the board's mail, ``workflow move`` and composing treat it."""

    name: str
    summary: str  # what the message says, one line
    priority: int = 4  # inbox order: 0 first
    style: str = ""  # rich style of the event in the coloured inbox ("" plain)
    reason: str = "CONTEXT"  # the template variable ``workflow move --reason`` fills
    decision: tuple[str, str] | None = None  # a reviewer's decision: the move (from, to) it makes
    enters: str | None = None  # ``workflow move`` into this state sends this event by default (ANY: any move)
    rules: tuple[str, ...] = ()  # names in RULES, applied when the message is composed
    answer: str | None = None  # it waits on a reply of this event type (the cockpit's Answer button, its "waits:")

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "summary": self.summary,
            "priority": self.priority,
            "style": self.style,
            "reason": self.reason,
            "decision": list(self.decision) if self.decision else None,
            "enters": self.enters,
            "rules": list(self.rules),
            "answer": self.answer,
        }


EVENTS: tuple[EventType, ...] = (
    EventType("review-request", "artifact ready for review", 1, "yellow", rules=("copy", "exists")),
    EventType(
        "approval",
        "review approved, artifact advancing",
        2,
        "green",
        decision=("proposed", "todo"),
        rules=("next-state", "next-roles", "copy", "exists"),
    ),
    EventType(
        "rejection",
        "review rejected, revision needed",
        2,
        "red",
        "REASON",
        decision=("proposed", "proposed"),
        rules=("copy", "exists"),
    ),
    EventType("clarification-request", "need clarification to proceed", 1, "magenta", "QUESTION", answer="answer"),
    EventType(
        "blocker-report",
        "work blocked",
        0,
        "bold red",
        "BLOCKING_DETAILS",
        enters="blocked",
        rules=("unblockers", "exists"),
        answer="answer",
    ),
    EventType("status-update", "progress (informational)", 3, "dim", enters=ANY, rules=("exists",)),
    EventType("question", "general question for an expert", 1, "magenta", "QUESTION", answer="answer"),
    EventType("answer", "response to a question", 2, "cyan"),
)

NAMES: tuple[str, ...] = tuple(e.name for e in EVENTS)
BY_NAME: Mapping[str, EventType] = MappingProxyType({e.name: e for e in EVENTS})
# The event types that wait on an answer (a question, a clarification request, a blocker).
WAITING: tuple[str, ...] = tuple(e.name for e in EVENTS if e.answer)
# A decision's move (from, to): an approval takes a proposed artifact on, a rejection leaves it for revision.
DECISIONS: Mapping[str, tuple[str, str]] = MappingProxyType({e.name: e.decision for e in EVENTS if e.decision})
# The event types whose mail carries the artifact's copy, and so records the version it carried.
VERSIONED: tuple[str, ...] = tuple(e.name for e in EVENTS if "copy" in e.rules)


def get(name: str | None) -> EventType:
    """The event type of this name; a project's own (or none) is a plain one."""
    found = BY_NAME.get(name or "")
    return found if found is not None else EventType(name or "", "a project's own event type")


def on_move(src: str, dst: str) -> str:
    """The event ``workflow move`` notifies with when none is given: the decision that makes this
    move, else the event type entered with ``dst``, else the one for any move."""
    for e in EVENTS:
        if e.decision == (src, dst):
            return e.name
    for e in EVENTS:
        if e.enters == dst:
            return e.name
    return next(e.name for e in EVENTS if e.enters == ANY)
