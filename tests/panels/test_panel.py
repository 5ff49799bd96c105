"""Review panels: sealed independent reviews, consensus rules, one unified decision, exactly one move."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from helpers.fake_anthropic import FakeAnthropic, text
from helpers.git import GIT_ENV, git_project, mail
from helpers.project import Project
from helpers.runs import anthropic_env
from workflow.mail.message import parse
from workflow.panels.review import consensus, parse_verdict

PANEL = """
[backends.scripted]
record_dir = "prompts"
"""


DEFAULT_PANEL = '[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", "gemini"]\n'


def set_panel(p: Project, block: str) -> None:
    """Replace the test project's spec-reviewer-panel table with ``block``."""
    toml = p.dir / "workflow.toml"
    text = toml.read_text()
    assert DEFAULT_PANEL in text
    toml.write_text(text.replace(DEFAULT_PANEL, block))


def panel_project(
    tmp_path: Path, verdicts: dict[str, str], panel: str = "", sleep: dict[str, float] | None = None
) -> Project:
    p = git_project(tmp_path / "panel", PANEL)
    if panel:
        set_panel(p, panel)
    (p.dir / "scripted").mkdir(exist_ok=True)
    for member, verdict in verdicts.items():
        steps = ""
        if sleep and member in sleep:
            steps += f"[[step]]\nsleep = {sleep[member]}\n"
        steps += f'[[step]]\nsay = "finding from {member}: SECRET-{member.upper()}\\nVERDICT: {verdict}"\n'
        (p.dir / "scripted" / f"spec-reviewer-panel.{member}.toml").write_text(steps)
    return p


def prompts(p: Project, member: str) -> list[str]:
    return [f.read_text() for f in sorted((p.dir / "prompts").glob(f"spec-reviewer-panel.{member}-*.prompt.md"))]


@pytest.mark.parametrize("rule", ["unanimous", "majority", "any-reject"])
def test_each_consensus_rule_on_each_verdict_mix(rule: str) -> None:
    for mix in itertools.product(["approve", "reject", "revise", None], repeat=3):
        votes = dict(zip(["a", "b", "c"], mix, strict=True))
        approve = mix.count("approve")
        expected = {
            "unanimous": approve == 3,
            "majority": approve >= 2,
            "any-reject": "reject" not in mix and approve >= 1,
        }[rule]
        decision, how = consensus(rule, votes)
        assert decision == ("approve" if expected else "reject"), (rule, mix)
        assert how.startswith(f"{rule}: {approve} approve")


def test_parse_verdict() -> None:
    assert parse_verdict("ok\nVERDICT: Approve") == ("approve", "ok")
    assert parse_verdict("**VERDICT: reject** no\nlater\nVERDICT: revise") == ("revise", "no\nlater")
    assert parse_verdict("no verdict here") == (None, "no verdict here")


def test_a_2_1_panel_decides_once_with_dissent_and_moves_the_artifact_once(tmp_path: Path) -> None:
    p = panel_project(tmp_path, {"claude": "approve", "gpt-5": "approve", "gemini": "reject"})
    secret = "WRITERS-ONLY-PLAN"
    p.send(
        "spec-writer-panel.claude", "question", "specs/*/user-auth.md", "spec-writer-panel-internal", QUESTION=secret
    )
    req = p.send(
        "spec-writer-panel", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel", CONTEXT="go"
    )
    r = p.run("panel", "review", "spec-reviewer-panel", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "approve (majority: 2 approve, 1 reject, 0 revise)" in r.stdout
    # Independence: each member's first input holds the request and the artifact, nothing from
    # writer-internal mail, and nothing from the other members' assessments.
    for member in ("claude", "gpt-5", "gemini"):
        first = prompts(p, member)[0]
        assert "# User auth" in first and "go" in first
        assert secret not in first
        assert not any(f"SECRET-{o.upper()}" in first for o in ("claude", "gpt-5", "gemini"))
    # The discussion round (after unsealing) does see the others' findings.
    assert "SECRET-GEMINI" in prompts(p, "claude")[1]
    decisions = [m for m in mail(p, "approval") if m[0].startswith("spec-writer-panel")]
    assert [m[0] for m in decisions] == [
        "spec-writer-panel.claude",
        "spec-writer-panel.gemini",
        "spec-writer-panel.gpt-5",
    ]
    # The unified decision: a new thread, no reference into internal mail, dissent recorded.
    raw = next(
        f for f in p.new_files("spec-writer-panel.claude") if parse(f.read_bytes()).event == "approval"
    ).read_bytes()
    d = parse(raw)
    assert d.in_reply_to is None and d.references == []
    assert d.sender == "spec-reviewer-panel@workflow.local" and d.state == "todo"
    body = raw.decode()
    assert "Dissent recorded: gemini" in body and "SECRET-GEMINI" in body
    # it hands on as the solo spec-reviewer's role file says (hands_off), naming nobody itself
    assert d.next_roles == ["skeleton-writer", "test-writer"]
    handed = [(m[0], m[2]) for m in mail(p, "approval") if not m[0].startswith("spec-writer-panel")]
    assert handed == [("skeleton-writer", "todo"), ("test-writer", "todo")], handed
    assert (p.dir / "specs" / "todo" / "user-auth.md").exists()
    log = p.run("log", "--format=%s", tool="git").stdout.splitlines()
    assert log.count("spec-reviewer-panel: approve user-auth (proposed → todo)") == 1
    # Running it again decides nothing more and moves nothing more.
    r = p.run("panel", "review", "spec-reviewer-panel", env=GIT_ENV)
    assert r.returncode == 0 and "no pending review-request" in r.stdout
    assert len(mail(p, "approval")) == 5
    st = json.loads(p.run("panel", "status", "user-auth", "--json").stdout)
    assert st[0]["members"] == {"claude": "approve", "gpt-5": "approve", "gemini": "reject"} and st[0]["moved"] is True
    assert st[0]["request"] == req


def test_a_rejecting_panel_leaves_the_artifact_and_lists_findings(tmp_path: Path) -> None:
    p = panel_project(tmp_path, {"claude": "revise", "gpt-5": "approve", "gemini": "reject"})
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel")
    r = p.run("panel", "review", "spec-reviewer-panel", env=GIT_ENV)
    assert r.returncode == 0, r.stdout
    assert [m[:3] for m in mail(p, "rejection")] == [("spec-writer", "rejection", "proposed")]
    assert (p.dir / "specs" / "proposed" / "user-auth.md").exists()


def test_sealed_assessments_are_refused_at_delivery_and_a_late_member_is_handled_by_the_deadline(
    tmp_path: Path,
) -> None:
    p = panel_project(
        tmp_path,
        {"claude": "approve", "gpt-5": "approve", "gemini": "approve"},
        DEFAULT_PANEL + "deadline = 1.5\n",
        sleep={"gemini": 6},
    )
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel")
    # While a review is sealed, a member cannot send its assessment to the others directly.
    from workflow.app import App
    from workflow.core.config import load_config
    from workflow.panels.store import PanelStore

    app = App(load_config(p.dir / "workflow.toml", env={}))
    panel = app.config.panel("spec-reviewer-panel")
    assert panel is not None and panel.deadline == 1.5
    with PanelStore(app.config.state.panels) as store:
        store.open("<x@y>", panel, "specs/proposed/user-auth.md", "spec-writer")
    r = p.run(
        "--from",
        "spec-reviewer-panel.claude",
        "status-update",
        "specs/*/user-auth.md",
        "spec-reviewer-panel-internal",
        "STATUS=mine",
        tool="workflow-notify",
    )
    assert r.returncode == 0  # ordinary internal mail passes
    from workflow.core.errors import GuardrailError
    from workflow.delivery.notify import NotifyRequest, compose, parent_in

    req = NotifyRequest(
        "status-update",
        ("specs/*/user-auth.md",),
        ("spec-reviewer-panel-internal",),
        "spec-reviewer-panel.claude",
        None,
        {"STATUS": "assessment"},
        (("X-Review-Verdict", "approve"),),
    )
    with app.index() as index:
        c = compose(req, app.config, app.roster, parent_in(index))
    with pytest.raises(
        GuardrailError, match="sealed-review: spec-reviewer-panel's review of specs/proposed/user-auth.md is sealed"
    ):
        app.deliverer.deliver(c.raw, c.recipients)
    with PanelStore(app.config.state.panels) as store:
        store.update("<x@y>", state="decided")
    r = p.run("panel", "review", "spec-reviewer-panel", env=GIT_ENV)
    assert r.returncode == 0, r.stdout
    assert "gemini: no assessment by the deadline" in r.stdout
    assert "approve (majority: 2 approve, 0 reject, 0 revise, 1 no verdict)" in r.stdout


def test_an_anthropic_member_gets_only_its_own_fresh_context(tmp_path: Path) -> None:
    p = git_project(tmp_path / "mixed")
    set_panel(
        p,
        '[panels.spec-reviewer-panel]\nmembers = [{ name = "claude", backend = "anthropic" }, "gpt-5"]\n'
        'consensus = "unanimous"\nrounds = 0\n',
    )
    (p.dir / "scripted").mkdir(exist_ok=True)
    (p.dir / "scripted" / "spec-reviewer-panel.gpt-5.toml").write_text(
        '[[step]]\nsay = "GPT-FINDING\\nVERDICT: approve"\n'
    )
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel", CONTEXT="ctx")
    with FakeAnthropic() as fake:
        fake.add(text("Looks right.\nVERDICT: approve"))
        r = p.run("panel", "review", "spec-reviewer-panel", env=anthropic_env(fake))
        reqs = fake.requests
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(reqs) == 1
    sent = json.dumps(reqs[0])
    assert "# User auth" in sent and "GPT-FINDING" not in sent
    assert "approve (unanimous: 2 approve" in r.stdout


def test_writing_panel_writes_by_sections_sends_the_review_request_and_answers_on_discussion(tmp_path: Path) -> None:
    p = panel_project(tmp_path, {"claude": "approve", "gpt-5": "approve", "gemini": "approve"})
    for m in ("claude", "gpt-5", "gemini"):
        step = f'[[step]]\nsay = "TEXT-BY-{m.upper()}"\nusage = {{ input_tokens = 100, output_tokens = 10 }}\n'
        (p.dir / "scripted" / f"spec-writer-panel.{m}.toml").write_text(step)
    r = p.run(
        "panel", "write", "spec-writer-panel", "billing", "--section", "Overview", "--section", "Errors", env=GIT_ENV
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # what each member's runs used, member by member: the primary proposes and decides each section
    assert "  claude: tokens: 400 in, 40 out" in r.stdout and "  gpt-5: tokens: 200 in, 20 out" in r.stdout, r.stdout
    doc = (p.dir / "specs" / "proposed" / "billing.md").read_text()
    assert doc.startswith("# Billing\n") and "## Overview\n\nTEXT-BY-CLAUDE" in doc and "## Errors" in doc
    internal = [parse(f.read_bytes()) for f in p.new_files("spec-writer-panel.gpt-5")]
    statuses = [m.get("Subject") for m in internal if "spec-writer-panel-internal@workflow.local" in m.recipients]
    assert len(statuses) == 8  # per section: announce, two contributions, decision
    # Nothing of the writers' internal thread reaches a reviewer's mailbox.
    assert not [f for f in p.new_files("spec-reviewer-panel.claude") if b"TEXT-BY-GPT-5" in f.read_bytes()]
    rr = list(mail(p, "review-request"))
    assert {m[0] for m in rr} == {
        "spec-reviewer-panel.claude",
        "spec-reviewer-panel.gpt-5",
        "spec-reviewer-panel.gemini",
    }
    assert "spec-writer-panel: draft billing (2 sections)" in p.run("log", "--format=%s", "-1", tool="git").stdout
    # A reviewer asks on the discussion address; the primary answers in that thread.
    q = p.send(
        "spec-reviewer-panel.gemini",
        "clarification-request",
        "specs/proposed/billing.md",
        "spec-discussion",
        QUESTION="Refunds?",
    )
    r = p.run("run-role", "--with-email", "spec-writer-panel", env=GIT_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  claude: tokens: 100 in, 10 out" in r.stdout, r.stdout  # its run report counts it for agentd
    answers = [parse(f.read_bytes()) for f in p.new_files("spec-reviewer-panel.gemini")]
    answer = [a for a in answers if a.event == "answer"]
    assert len(answer) == 1 and answer[0].in_reply_to == q
    assert answer[0].sender == "spec-writer-panel.claude@workflow.local"


def test_agentd_wakes_a_review_panel(tmp_path: Path) -> None:
    from helpers.agentd import Daemon

    p = panel_project(tmp_path, {"claude": "approve", "gpt-5": "reject", "gemini": "reject"})
    (p.dir / "workflow.toml").write_text(
        (p.dir / "workflow.toml").read_text() + '\n[agentd]\nrescan = 1\nroles = ["spec-reviewer-panel"]\n'
    )
    d = Daemon(p)
    try:
        p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel")
        d.wait_for(lambda: bool(mail(p, "rejection")), "the panel's decision")
        d.wait_for(d.idle, "agentd to settle")
        import time

        time.sleep(1.5)
    finally:
        d.stop()
    assert [m[:2] for m in mail(p, "rejection")] == [("spec-writer", "rejection")]
    assert len([e for e in d.events("started") if "task" in e]) == 1


def test_a_panels_member_runs_count_in_its_tokens_and_budget_member_by_member(tmp_path: Path) -> None:
    """Issue 48: a panel's run report had empty usage, so `[agentd]` budgets could not bound it and
    `agentd status` left it out. Each member's run reports usage: agentd counts the sum against the
    panel's budget (which pauses it) and shows each member's tokens."""
    from helpers.agentd import Daemon

    p = panel_project(tmp_path, {"claude": "approve", "gpt-5": "approve", "gemini": "approve"})
    for n, member in enumerate(("claude", "gpt-5", "gemini"), 1):
        script = p.dir / "scripted" / f"spec-reviewer-panel.{member}.toml"
        usage = f"[[step]]\nusage = {{ input_tokens = {1000 * n}, output_tokens = {10 * n} }}\n"
        script.write_text(usage + script.read_text())
    agentd = '\n[agentd]\nrescan = 1\nroles = ["spec-reviewer-panel"]\nrole_budgets = { spec-reviewer-panel = 5000 }\n'
    (p.dir / "workflow.toml").write_text((p.dir / "workflow.toml").read_text() + agentd)
    d = Daemon(p)
    try:
        p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel")
        d.wait_for(lambda: bool(d.events("paused")), "the panel paused over its budget")
    finally:
        d.stop()
    status = json.loads(p.run("agentd", "status", "--json").stdout)
    # each member runs twice: its sealed assessment and the discussion round
    assert status["tokens_today"] == {"spec-reviewer-panel": 12120}, status
    members = status["members_today"]["spec-reviewer-panel"]
    assert {m: u["tokens"] for m, u in members.items()} == {"claude": 2020, "gpt-5": 4040, "gemini": 6060}, status
    assert "over its daily token budget: 12120 > 5000" in status["paused"]["spec-reviewer-panel"], status
    shown = p.run("agentd", "status").stdout
    assert "panel spec-reviewer-panel today: claude 2020 tokens, gemini 6060 tokens, gpt-5 4040 tokens" in shown, shown
