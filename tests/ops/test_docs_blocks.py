"""docs/ command blocks, run as pasted: each page with ```bash blocks is run by a test, as
docs/mail-clients.md and docs/team.md are; the pages not run yet are named here, so a new page
cannot join them unnoticed (issue 50, item 5)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from helpers.docs import BLOCK, blocks, run
from helpers.git import GIT_ENV
from workflow.core.events import EVENTS
from workflow.policy.guardrails import RULES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUN = {  # page → the test file that runs its blocks
    "mail-clients.md": "tests/ops/test_mail_clients.py",
    "team.md": "tests/ops/test_team_page.py",
    "guardrails-and-events.md": "tests/ops/test_docs_blocks.py",
}
NOT_YET = {  # reference blocks with placeholders or daemons: to be made walkthroughs and run
    "agentd.md",
    "artifacts.md",
    "bridges.md",
    "cockpit.md",
    "mail-server.md",
    "operations.md",
    "performance.md",
    "reading-mail.md",
    "roles-and-panels.md",
    "running-roles.md",
}


def test_every_page_with_command_blocks_is_run_by_a_test_or_named_as_not_yet() -> None:
    with_blocks = {p.name for p in DOCS.glob("*.md") if BLOCK.search(p.read_text())}
    assert with_blocks == set(RUN) | NOT_YET, with_blocks ^ (set(RUN) | NOT_YET)
    assert not set(RUN) & NOT_YET
    for page, test in RUN.items():
        assert page in (ROOT / test).read_text(), (page, test)


def test_the_guardrails_and_events_page_runs_as_pasted(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")},
        **GIT_ENV,
        "HOME": str(tmp_path / "home"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    project = tmp_path / "p"
    project.mkdir()
    run(["workflow init"], project, env)  # the project a user has when they read the page
    sections = blocks(DOCS / "guardrails-and-events.md")
    guardrails, as_json = run(sections["Guardrails — `workflow guardrails`"], project, env)
    for rule in RULES:
        assert re.search(rf"^\s*{re.escape(rule.name)}\b", guardrails, re.M), (rule.name, guardrails)
    assert {r["name"] for r in json.loads(as_json)["guardrails"]} == {r.name for r in RULES}
    events, as_json = run(sections["Event types — `workflow events`"], project, env)
    for e in EVENTS:
        assert e.name in events, (e.name, events)
    assert {e.name for e in EVENTS} <= {str(x.get("name")) for x in json.loads(as_json)["events"]}
