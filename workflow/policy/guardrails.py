"""Guardrails: workflow rules checked at delivery — rule objects in one table, each switchable.

Each rule has the name its refusals start with (its ``[guardrails]`` switch), its default,
what it refuses (one line, for ``workflow guardrails``) and a ``check`` returning the refusal as
an error object, or None. A new rule is a class here and its entry in ``RULES``. Every refusal says what would be accepted, so a model that sent the
message can correct itself. ``workflow guardrails`` prints the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import NamedTuple, Protocol

from workflow.core import safeopen
from workflow.core.addresses import parse_internal
from workflow.core.config import Config
from workflow.core.errors import ConfigError, GuardrailError
from workflow.core.events import DECISIONS
from workflow.core.locate import Artifact, by_key, has_glob, locate
from workflow.core.schema import suggest, where
from workflow.mail.index import Index
from workflow.mail.message import Parsed
from workflow.mail.seals import sealed_artifacts
from workflow.policy.roster import Roster
from workflow.policy.visibility import RULES as VISIBILITY_RULES
from workflow.policy.visibility import FixedRule

# Checked by the SMTP server, where an envelope exists: the message speaks for whoever submitted it.
SENDER_MATCHES_ENVELOPE = FixedRule(
    "sender-matches-envelope", "a message whose From: is another identity than MAIL FROM"
)
# Checked for every delivery: the mark of outside mail is the bridges' alone (``mail.imported``).
BRIDGE_MARK = FixedRule(
    "bridge-import-mark", "a message carrying an X-Bridge* header: only a bridge's import marks mail as outside mail"
)
ALWAYS = (*VISIBILITY_RULES, SENDER_MATCHES_ENVELOPE, BRIDGE_MARK)  # every rule that cannot be switched off


class Stay(NamedTuple):
    """A past stay of an artifact in a state: moved there at ``entered`` by the role ``by``, moved on
    at ``left`` (seconds); every move since, and those two, commits our own code made."""

    entered: int
    left: int
    by: str


# An artifact's past stay in a state (None: none, or one its history cannot vouch for): given by
# the layer that reads git (``artifacts.movers.stay``, passed in by the entry point).
History = Callable[[Config, Artifact, str], Stay | None]


@dataclass(frozen=True)
class Mail:
    """What a rule may look at: the message, who sends it, and the project around it."""

    config: Config
    roster: Roster
    parsed: Parsed
    sender: str
    index: Index
    history: History | None = None


class Rule(Protocol):
    """One guardrail: ``check`` returns the refusal (naming the rule) or None."""

    name: str
    default: bool  # on unless [guardrails] says otherwise
    refuses: str  # what, in one line

    def check(self, m: Mail) -> GuardrailError | None: ...


class ReviewerDecisions:
    """Approvals and rejections come only from reviewers, review panels (or members) and humans."""

    name = "reviewer-decisions"
    default = True
    refuses = "an approval or rejection not from a *-reviewer role, a review panel (or member) or a human role"

    def check(self, m: Mail) -> GuardrailError | None:
        if m.parsed.event not in DECISIONS:
            return None
        role = m.roster.roles.get(m.sender)
        panel = m.roster.panels.get(m.sender) or m.roster.members.get(m.sender)
        if (role is not None and (role.name.endswith("-reviewer") or role.mode == "human")) or (
            panel is not None and panel.kind == "review"
        ):
            return None
        return GuardrailError(
            self.name,
            f"an {m.parsed.event} may come only from a reviewer role (*-reviewer), a review panel or a human; "
            f"{m.sender} is none of these — send a status-update or question instead",
        )


class ReplyVisible:
    """In-Reply-To must name a message the sender received or sent; a parent nobody here has
    seen is allowed (threads tolerate missing parents)."""

    name = "reply-visible"
    default = True
    refuses = "an In-Reply-To naming a stored message the sender never received or sent (unknown parents pass)"

    def check(self, m: Mail) -> GuardrailError | None:
        parents = m.parsed.in_reply_to_ids  # every one: a harmless id first hides nothing
        if not parents:
            return None
        boxes, addresses = m.roster.view(m.sender)
        for parent in parents:
            rows = m.index.query(message_ids=[parent])
            if rows and not any(r.mailbox in boxes or r.sender in addresses for r in rows):
                return GuardrailError(
                    self.name,
                    f"In-Reply-To {parent} names a message {m.sender} never received or sent; "
                    "reply only to messages in your own mailbox, or start a new thread",
                )
        return None


class ArtifactsExist:
    """X-Artifacts must match at least one file in the project (off by default: mail may be
    sent before the artifact is committed)."""

    name = "artifacts-exist"
    default = False
    refuses = "X-Artifacts that match no file in the project"

    def check(self, m: Mail) -> GuardrailError | None:
        artifacts = m.parsed.artifacts
        if not artifacts or any(safeopen.exists(m.config, a.path) for p in artifacts for a in locate(p, m.config)):
            return None
        return GuardrailError(
            self.name,
            f"X-Artifacts {', '.join(artifacts)} match no file in {m.config.project_dir}; "
            "commit the artifact first or fix the path (globs like specs/*/name.md are fine)",
        )


class StateMatches:
    """X-Workflow-State names the folder *every* artifact the message names is in now (a glob
    judges each file it matches), or was in when the message says it was written, put there by the
    sender's own move (``_true_when_written``); a review-request names each artifact's current path. An artifact not found, or in two
    folders, is not judged (``workflow doctor`` reports it)."""

    name = "state-matches"
    default = True
    refuses = (
        "an X-Workflow-State other than the folder each artifact is in now (but one the sender's own move "
        "made true, dated before the next move, within a run's timeout), and a review-request naming an old "
        "path of a moved artifact"
    )

    def check(self, m: Mail) -> GuardrailError | None:
        claim = m.parsed.state
        for ref in m.parsed.artifacts:
            found = by_key(locate(ref, m.config))
            for copies in found.values():
                if len(copies) != 1:
                    continue
                now = copies[0]
                if m.parsed.event == "review-request" and ref != now.path and not has_glob(ref):
                    return GuardrailError(
                        self.name,
                        f"review-request names {ref}, but the artifact is now {now.path}; "
                        f"request a review of {now.path}",
                    )
                if claim and claim != now.state:
                    role = m.roster.roles.get(m.sender)
                    if role is not None and role.mode == "human":  # a person at a mail client: no shell
                        if DECISIONS.get(m.parsed.event or "") == (now.state, claim):
                            continue  # a person's decision, applied as their move once delivered
                        return GuardrailError(
                            self.name,
                            f"artifact {now.path} is in {now.state}/, message claims {claim}; from a mail client "
                            "leave X-Workflow-State out — a reply to the review-request whose first line is "
                            "Approve, Reject or Revise is applied as your move — or claim "
                            f"{now.state}",
                        )
                    if _true_when_written(m, now, claim):
                        continue  # it moved on since: the claim is history, not a lie
                    return GuardrailError(
                        self.name,
                        f"artifact {ref if len(found) == 1 else f'{ref} ({now.path})'} is in {now.state}/, "
                        f"message claims {claim}; move it first (workflow move {now.stem} {claim}) or claim {now.state}",
                    )
        return None


def _true_when_written(m: Mail, now: Artifact, claim: str) -> bool:
    """Whether the sender's own move put the artifact in ``claim`` and the message says it was
    written (its one Date) before a later move took it on: a run's mail is sent when its run
    commits, and other roles may have moved the artifact meanwhile. Only for mail no older than a
    run of the sender may take (its run timeout): a Date set back claims only what the sender
    itself made true, and only for as long as a run's mail may wait."""
    if m.history is None:
        return False
    written = _date(m.parsed)
    stay = m.history(m.config, now, claim) if written is not None else None
    if stay is None or written is None or stay.by != m.sender:
        return False
    held = m.config.agentd.role_timeouts.get(m.sender, m.config.agentd.timeout)
    return stay.entered <= written <= stay.left and time.time() - written <= held


def _date(parsed: Parsed) -> int | None:
    """The message's Date in seconds, or None when it has none a parser reads."""
    from email.utils import parsedate_to_datetime  # lazy: only a disagreeing claim needs it

    dates = parsed.get_all("Date")
    if len(dates) != 1:  # none, or several a reader may each take for the one
        return None
    try:
        return int(parsedate_to_datetime(str(dates[0])).timestamp())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class SealedReview:
    """No verdict reaches a review panel — its internal address, its own address or a member's —
    while its review of the artifact the message is about is sealed: assessments are filed
    through the panel session and unsealed together. What the message is about is judged by
    root and file name, globs resolved (``specs/*/user-aut?.md`` is user-auth.md); a verdict
    naming no artifact is refused while any review of that panel is sealed."""

    name = "sealed-review"
    default = True
    refuses = (
        "a message with X-Review-Verdict to a review panel's internal address while that panel's review of "
        "the artifact is sealed"
    )

    def check(self, m: Mail) -> GuardrailError | None:
        if m.parsed.get("X-Review-Verdict") is None:
            return None
        for panel in sorted(self._panels(m)):
            held = sealed_artifacts(m.config.state, panel)
            if held and (not m.parsed.artifacts or any(about(a, s) for a in m.parsed.artifacts for s in held)):
                return GuardrailError(
                    self.name,
                    f"{panel}'s review of {', '.join(held)} is sealed until every member has filed or the deadline "
                    "passes; assessments are filed through the panel session (workflow panel review), not sent",
                )
        return None

    @staticmethod
    def _panels(m: Mail) -> set[str]:
        """The review panels any recipient address belongs to (internal, the panel, a member)."""
        out: set[str] = set()
        for addr in m.parsed.recipients:
            local, _, domain = addr.rpartition("@")
            if domain != m.config.domain:
                continue
            panel = parse_internal(local) or local
            if panel in m.roster.members:
                panel = m.roster.members[panel].name
            if panel in m.roster.panels:
                out.add(panel)
        return out


def about(pattern: str, sealed: str) -> bool:
    """Whether an X-Artifacts entry names the sealed artifact: same root and file name, whatever
    the state folder, globs matched."""
    parts, held = PurePosixPath(pattern).parts, PurePosixPath(sealed).parts
    if not parts or not held:
        return False
    name_ok = fnmatchcase(held[-1], parts[-1])
    return name_ok and (len(parts) == 1 or fnmatchcase(held[0], parts[0]))


RULES: tuple[Rule, ...] = (ReviewerDecisions(), ReplyVisible(), ArtifactsExist(), StateMatches(), SealedReview())


class Listed(NamedTuple):
    """A rule as ``workflow guardrails`` shows it."""

    name: str
    on: bool
    default: bool
    refuses: str

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def switches(config: Config, rules: Sequence[Rule] = RULES) -> dict[str, bool]:
    """Each rule on or off: as ``[guardrails]`` sets it, else its default. A name no rule has is
    refused (``App`` asks, so every command refuses a typo at start)."""
    names = [r.name for r in rules]
    for name in config.guardrails:
        if name not in names:
            raise ConfigError(
                f"{where(str(config.path or 'workflow.toml'), 'guardrails', name)}: unknown key"
                f"{suggest(name, names)}; expected one of {', '.join(names)}"
            )
    return {r.name: config.guardrails.get(r.name, r.default) for r in rules}


def listing(config: Config) -> list[Listed]:
    """Every guardrail in check order, with its switch as configured."""
    on = switches(config)
    return [Listed(r.name, on[r.name], r.default, r.refuses) for r in RULES]


def check(
    config: Config,
    roster: Roster,
    parsed: Parsed,
    sender: str,
    index: Index,
    rules: Sequence[Rule] = RULES,
    history: History | None = None,
) -> None:
    """Raise the refusal of the first enabled rule the message breaks."""
    mail = Mail(config, roster, parsed, sender, index, history)
    for rule in rules:
        if config.guardrails.get(rule.name, rule.default):
            refusal = rule.check(mail)
            if refusal is not None:
                raise refusal
