"""Guardrails: workflow rules checked at delivery, each named, documented and switchable.

Configured under ``[guardrails]`` in workflow.toml (true/false). Every refusal names its rule
and says what would be accepted, so a model that sent the message can correct itself:

  reviewer-decisions  approvals and rejections come only from a reviewer role (``*-reviewer``),
                      a review panel or one of its members, or a human role   (default on)
  reply-visible       In-Reply-To must name a message the sender received or sent; a parent
                      nobody here has seen is allowed (threads tolerate missing parents)  (on)
  artifacts-exist     X-Artifacts must match at least one file in the project  (default off:
                      mail may be sent before the artifact is committed)
  state-matches       X-Workflow-State must name the state folder the (first) artifact is in
                      now, and a review-request must name the artifact's current path  (on);
                      an artifact not found, or found in two folders, is not judged here
  sealed-review       a message with X-Review-Verdict to a review panel's internal address is
                      refused while that panel's review of the artifact is sealed: assessments
                      are filed through the panel session and unsealed together  (on)
"""

from __future__ import annotations

from pathlib import Path

from workflow.core.locate import GLOB_CHARS, by_key, locate
from workflow.core.config import Config
from workflow.core.errors import GuardrailError
from workflow.mail.index import Index
from workflow.mail.message import Parsed
from workflow.policy.roster import Roster

DECISIONS = ("approval", "rejection")


def check(config: Config, roster: Roster, parsed: Parsed, sender: str, index: Index) -> None:
    """Raise GuardrailError for the first enabled rule the message breaks."""
    rules = config.guardrails
    if rules.get("reviewer_decisions") and parsed.event in DECISIONS:
        _reviewer_decisions(roster, parsed.event or "", sender)
    if rules.get("reply_visible") and parsed.in_reply_to:
        _reply_visible(roster, parsed.in_reply_to, sender, index)
    if rules.get("artifacts_exist") and parsed.artifacts:
        _artifacts_exist(config.project_dir, parsed.artifacts)
    if rules.get("state_matches") and parsed.artifacts:
        _state_matches(config, parsed)
    if rules.get("sealed_review") and parsed.get("X-Review-Verdict"):
        _sealed_review(config, roster, parsed)


def _reviewer_decisions(roster: Roster, event: str, sender: str) -> None:
    role = roster.roles.get(sender)
    panel = roster.panels.get(sender) or roster.members.get(sender)
    if (role is not None and (role.name.endswith("-reviewer") or role.mode == "human")) or (
        panel is not None and panel.kind == "review"
    ):
        return
    raise GuardrailError(
        "reviewer-decisions",
        f"an {event} may come only from a reviewer role (*-reviewer), a review panel or a human; "
        f"{sender} is none of these — send a status-update or question instead",
    )


def _reply_visible(roster: Roster, parent: str, sender: str, index: Index) -> None:
    rows = index.query(message_ids=[parent])
    if not rows:
        return
    boxes, addresses = roster.view(sender)
    if any(r.mailbox in boxes or r.sender in addresses for r in rows):
        return
    raise GuardrailError(
        "reply-visible",
        f"In-Reply-To {parent} names a message {sender} never received or sent; "
        "reply only to messages in your own mailbox, or start a new thread",
    )


def _artifacts_exist(project: Path, artifacts: list[str]) -> None:
    for pattern in artifacts:
        if next(iter(project.glob(pattern)), None) is not None:
            return
    raise GuardrailError(
        "artifacts-exist",
        f"X-Artifacts {', '.join(artifacts)} match no file in {project}; "
        "commit the artifact first or fix the path (globs like specs/*/name.md are fine)",
    )


def _state_matches(config: Config, parsed: Parsed) -> None:
    ref = parsed.artifacts[0]
    found = locate(ref, config)
    if len(by_key(found)) != 1 or len(found) != 1:
        return
    now = found[0]
    if parsed.event == "review-request" and ref != now.path and not GLOB_CHARS.search(ref):
        raise GuardrailError(
            "state-matches",
            f"review-request names {ref}, but the artifact is now {now.path}; request a review of {now.path}",
        )
    claim = parsed.state
    if claim and claim != now.state:
        raise GuardrailError(
            "state-matches",
            f"artifact {ref} is in {now.state}/, message claims {claim}; "
            f"move it first (workflow move {now.stem} {claim}) or claim {now.state}",
        )


def _sealed_review(config: Config, roster: Roster, parsed: Parsed) -> None:
    from workflow.panels.review import sealed_for

    for addr in parsed.recipients:
        local, _, domain = addr.rpartition("@")
        if domain != config.domain or not local.endswith("-internal"):
            continue
        panel = local[: -len("-internal")]
        if panel not in roster.panels:
            continue
        held = sealed_for(config, panel)
        names = {a.rsplit("/", 1)[-1] for a in held}
        if held and any(a.rsplit("/", 1)[-1] in names for a in parsed.artifacts):
            raise GuardrailError(
                "sealed-review",
                f"{panel}'s review of {', '.join(held)} is sealed until every member has filed or the deadline "
                "passes; assessments are filed through the panel session (workflow panel review), not sent",
            )
