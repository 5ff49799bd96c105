"""The design's pipeline with spec-reviewer as a review panel of three members on the real agent
CLIs from npm — Claude Code, Codex and Gemini CLI — each against its stand-in model API at the
wire; every other role on the anthropic backend against the pipeline model (helpers.pipeline_model).

Issue 48: the panel reviewed, decided unanimously, moved the spec to todo/, and its approval named
nobody next, so the pipeline stopped there for good; and a panel run's report had empty usage, so
its members' tokens counted nowhere. Now the unified approval hands on as spec-reviewer's role file
declares (hands_off), the pipeline reaches done, and `agentd status` shows each member's tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.agent_clis import cli_bin, needs_claude, needs_codex, needs_gemini
from helpers.fake_gemini import FakeGemini
from helpers.fake_gemini import text as gemini_text
from helpers.fake_openai import FakeOpenAI
from helpers.fake_openai import text as openai_text
from helpers.pipeline_model import PipelineModel
from helpers.pipeline_run import ARTIFACTS, app_of, ask, init, until_done, up
from helpers.sandboxing import needs_bwrap

PANEL = """
[panels.spec-reviewer-panel]
members = [
  { name = "claude", backend = "claude-code" },
  { name = "codex", backend = "codex" },
  { name = "gemini", backend = "gemini" },
]
consensus = "unanimous"
rounds = 0
deadline = 120
"""


@needs_bwrap
@needs_claude
@needs_codex
@needs_gemini
def test_a_panel_of_three_clis_as_spec_reviewer_reaches_done_and_counts_each_members_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with PipelineModel(spec_reviewer="spec-reviewer-panel") as model, FakeOpenAI() as openai, FakeGemini() as gemini:
        openai.add(openai_text("Complete and testable.\nVERDICT: approve", usage=(400, 40)))
        gemini.add(gemini_text("Complete and testable.\nVERDICT: approve", usage=(500, 50)))
        proj, env = init(tmp_path, model)
        env.update(PATH=f"{cli_bin()}:{env['PATH']}", OPENAI_BASE_URL=openai.url, OPENAI_API_KEY="sk-x", **gemini.env())
        toml = proj / "workflow.toml"
        toml.write_text(toml.read_text() + PANEL)
        app = app_of(proj)
        log = tmp_path / "up.out"
        with up(proj, env, app, log) as proc:
            t0 = time.monotonic()
            ask(proj, env)
            took = until_done(proj, app, model, proc, log, t0, timeout=150)
        print(f"panel pipeline: first mail to done in {took:.1f}s; runs {model.runs()}")
    assert all((proj / "specs" / "done" / f"{a}.md").exists() for a in ARTIFACTS)
    assert len(model.members) == 1 and len(openai.requests) == 1 and len(gemini.requests) == 1
    assert "spec-reviewer" not in model.runs()  # the panel reviewed, not the solo role
    r = subprocess.run(
        [sys.executable, "-m", "workflow", "agentd", "status", "--json"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status = json.loads(r.stdout)
    # the panel's run log names each member's tool calls and its CLI's transcript
    (panel_log,) = [
        f.read_text() for f in app.config.state.runs.glob("task-*.log") if "gemini: tool calls" in f.read_text()
    ]
    for member in ("claude", "codex", "gemini"):
        path = panel_log.split(f"  {member}: transcript: ", 1)[1].split("\n", 1)[0]
        assert "VERDICT: approve" in Path(path).read_text(), (member, path)
    members = status["members_today"]["spec-reviewer-panel"]
    assert sorted(members) == ["claude", "codex", "gemini"], status
    assert members["codex"]["tokens"] == 440 and members["gemini"]["tokens"] >= 550, members
    assert members["claude"]["tokens"] >= 330 and members["claude"]["cost"] > 0, members
    assert status["tokens_today"]["spec-reviewer-panel"] == sum(m["tokens"] for m in members.values()), status
