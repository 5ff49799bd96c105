"""The design's whole pipeline, by itself: one person's request to done, through `workflow up`.

`workflow init` with ANTHROPIC_API_KEY set (every built-in role on the anthropic backend, the roles
unchanged), `workflow up`, one `workflow-notify` from the person, and a stand-in Messages API at
the wire (helpers.pipeline_model) playing each role as its role file allows. Nothing else acts.
The reviewers' approvals name no NEXT_ROLES: who works next comes from their roles' hands_off.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from helpers.pipeline_model import PipelineModel
from helpers.pipeline_run import app_of, ask, check_invariants, init, until_done, up


def test_one_request_reaches_done_with_no_human_action(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # init's mail root is ~/.maildir/workflow: this test's own
    with PipelineModel() as model:
        proj, env = init(tmp_path, model)
        app = app_of(proj)
        log = tmp_path / "up.out"
        with up(proj, env, app, log) as proc:
            t0 = time.monotonic()
            ask(proj, env)
            took = until_done(proj, app, model, proc, log, t0)
    print(f"pipeline: first mail to done in {took:.1f}s; runs {model.runs()}; {len(model.calls)} model calls")
    check_invariants(proj, app, model)
    # the spec as revised after the clarification is what reached done
    assert "Retry-After" in (proj / "specs" / "done" / "rate-limit.md").read_text()
