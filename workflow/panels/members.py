"""Members: one panel member run as its own role — its mailbox name, its backend, read-only tools.

A member works under the panel's base role (``{kind}-reviewer`` or ``{kind}-writer``: its prompt
and settings) renamed to its own mailbox (``spec-reviewer-panel.claude``), with its own model,
and can read artifacts but never write, move or send: the panel protocol sends for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflow.agents.backends import RunInput, RunResult, make_backend
from workflow.agents.tools import RoleTools
from workflow.app import App
from workflow.core.addresses import internal_address
from workflow.core.config import PanelConfig
from workflow.core.errors import WorkflowError
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import Transport
from workflow.policy.roles import Role

MAX_TEXT = 20_000  # characters of a member's text that go into one internal message


def base_role_name(panel: PanelConfig) -> str:
    """``spec-reviewer`` for a review panel of specs, ``spec-writer`` for a writing panel."""
    return f"{panel.artifact_kind}-{'reviewer' if panel.kind == 'review' else 'writer'}"


def base_prompt(app: App, panel: PanelConfig) -> str:
    name = base_role_name(panel)
    return app.roster.roles[name].prompt.strip() if name in app.roster.roles else ""


def member_role(app: App, panel: PanelConfig, member: str) -> Role:
    name = base_role_name(panel)
    spec = next(m for m in panel.members if m.name == member)
    base = app.roster.roles[name] if name in app.roster.roles else Role(name, "async", "", "", app.config.project_dir)
    return base._replace(name=panel.mailbox(member), model=spec.model)


def run_member(
    app: App, panel: PanelConfig, member: str, prompt: str, transport: Transport, backend: str | None = None
) -> RunResult:
    """One run of one member on its backend (``backend`` overrides every member's own)."""
    spec = next(m for m in panel.members if m.name == member)
    role = member_role(app, panel, member)
    try:
        agent = make_backend(app.config, backend or spec.backend)
        return agent.run(RunInput(role, prompt, RoleTools(app, role, transport, read_only=True), (), spec.model))
    except WorkflowError as e:
        return RunResult(False, "", str(e))


def internal_note(
    panel: PanelConfig,
    member: str,
    artifact: str,
    status: str,
    text: str,
    in_reply_to: str | None,
    headers: Sequence[tuple[str, str]] = (),
) -> NotifyRequest:
    """A member's status-update to the panel's internal address (a proposal, an assessment…)."""
    return NotifyRequest(
        "status-update",
        (artifact,),
        (internal_address(panel.name),),
        panel.mailbox(member),
        in_reply_to,
        {"STATUS": status, "CONTEXT": text[:MAX_TEXT] or "(empty)"},
        tuple(headers),
    )


class Spent:
    """What a panel's member runs used, member by member: tokens (and cost) as each backend reported."""

    def __init__(self) -> None:
        self.members: dict[str, dict[str, int]] = {}

    def add(self, member: str, res: RunResult) -> None:
        mine = self.members.setdefault(member, {})
        for k, v in res.usage.items():
            mine[k] = mine.get(k, 0) + int(v)

    def total(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for used in self.members.values():
            for k, v in used.items():
                out[k] = out.get(k, 0) + v
        return out

    def lines(self) -> list[str]:
        """One line per member, as the panel's run log shows it."""
        return [
            f"{m}: tokens: {u.get('input_tokens', 0)} in, {u.get('output_tokens', 0)} out"
            + (f", ${u['cost_microusd'] / 1e6:.4f}" if u.get("cost_microusd") else "")
            for m, u in self.members.items()
        ]
