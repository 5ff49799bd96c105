"""The fault harness: a CI-sized campaign on a fixed seed holds every promise, schedules are
reproducible, and the checks do catch what they look for (escaped processes, doubled mail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.project import ROOT
from tools.chaos import Mail, Schedule, play, schedule
from tools.chaos_check import Tally, campaign, check
from workflow.agents.contain import choose

CONTAINED = choose("auto").complete
needs_containment = pytest.mark.skipif(
    not CONTAINED, reason="neither bubblewrap nor a writable cgroup v2: install bubblewrap (scripts/system-packages)"
)


def test_a_seed_gives_the_same_schedules_every_time() -> None:
    assert [schedule(4, i) for i in range(30)] == [schedule(4, i) for i in range(30)]
    assert [schedule(4, i).digest() for i in range(5)] != [schedule(5, i).digest() for i in range(5)]
    every = [schedule(4, i) for i in range(30)]
    assert {m.shape for s in every for m in s.mails} == {"single", "copies", "burst"}
    assert {f.kind for s in every for f in s.faults} == {"kill-agentd", "stop-agentd", "kill-run"}
    assert {b for s in every for p in s.plans().values() for b in p} == {"ok", "fail", "hang", "send-then-fail", "fork"}
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "chaos"), "--seed", "4", "--schedules", "6", "--dry-run"]
    first = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert first == subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "fingerprint" in first and schedule(4, 5).digest() in first


@needs_containment
def test_a_ci_sized_campaign_holds_every_promise(tmp_path: Path) -> None:
    # Seed 91's first 5 schedules — the fewest that hold everything: single mails, bursts and
    # copies; every agent behaviour; agentd killed and stopped; run-roles killed. Two schedules at
    # a time (~30 s on two cores; scripts/bench/chaos plays hundreds).
    lines: list[str] = []
    tally = campaign(91, 5, tmp_path, lines.append, jobs=2)
    report = tally.report()
    assert tally.ok, report + "\n" + "\n".join(lines)
    assert tally.schedules == 5 and len(lines) == 5
    assert tally.checked["every (role, message) handled by exactly one successful run"][0] >= 65, report
    for fault in ("mails: burst", "mails: copies", "agentd SIGKILL + restart", "agentd SIGTERM + restart"):
        assert tally.faults.get(fault, 0) >= 1, report
    for behaviour in ("fail", "fork", "send-then-fail", "hang"):
        assert tally.faults.get(f"agent attempts: {behaviour}", 0) >= 1, report
    assert tally.faults["answers sent by failed or killed runs (held back)"] >= 1, report
    assert not list(tmp_path.iterdir()), "a schedule that held every promise leaves nothing behind"


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
def test_without_containment_the_harness_sees_processes_outlive_their_runs(tmp_path: Path) -> None:
    s = Schedule(0, 0, (Mail(0.0, "<chaos-escape@workflow.local>", ("spec-writer",), (("fork", "ok"),), "single"),), ())
    played = play(tmp_path, s, contain="none", patience=5)
    verdicts = {v.promise: v for v in check(played)}
    outlived = verdicts["no process of a finished run alive"].violations
    assert any("outlived it" in v for v in outlived), verdicts
    assert any("spec-writer.running is still held" in v for v in outlived), verdicts


def test_the_checks_see_an_answer_delivered_twice(tmp_path: Path) -> None:
    s = Schedule(0, 1, (Mail(0.0, "<chaos-twice@workflow.local>", ("test-writer",), (("ok",),), "single"),), ())
    played = play(tmp_path, s, patience=30)
    assert all(not v.violations for v in check(played)), check(played)
    box = played.project / "mail" / "user"
    reply = next(f for sub in ("new", "cur") for f in (box / sub).iterdir())
    shutil.copy(reply, box / "new" / "1.copy.host")
    verdicts = {v.promise: v for v in check(played)}
    assert any(
        "answered 2 time(s)" in v
        for v in verdicts["every (role, message) handled by exactly one successful run"].violations
    )
    assert any(
        "stored 2 times in user" in v
        for v in verdicts["every mail of a successful run delivered exactly once"].violations
    )
    t = Tally()
    t.add(played, list(verdicts.values()))
    assert not t.ok and "VIOLATED: every (role, message) handled by exactly one successful run" in t.report()
