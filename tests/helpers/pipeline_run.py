"""The pipeline test's parts, shared by its variants (tests/agentd/test_pipeline*.py): a project made
by `workflow init` against the stand-in model (helpers.pipeline_model), `workflow up`, waiting until
every artifact is in done/ with nothing left to run, and the invariants a clean pipeline keeps."""

from __future__ import annotations

import os
import re
import signal
import smtplib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.agent_clis import cli_bin
from helpers.git import GIT_ENV
from helpers.pipeline_model import PipelineModel
from helpers.project import free_port
from helpers.tiers import spawning
from workflow.agentd.tasks import Tasks, TaskStatus
from workflow.app import App
from workflow.artifacts.move import role_moves
from workflow.core.config import load_config
from workflow.mail.message import parse

ARTIFACTS = ("rate-limit", "rate-limit-skeleton", "rate-limit-tests")
REQUEST = "Please write a spec for rate limiting the public API"


@spawning
def init(tmp_path: Path, model: PipelineModel, clis: bool = False) -> tuple[Path, dict[str, str]]:
    """`workflow init` with ANTHROPIC_API_KEY set: every built-in role on the anthropic backend;
    with ``clis`` the agent CLIs from npm on PATH, so every role on Claude Code (the first found),
    which reaches the stand-in model by ``[runs] env`` (ANTHROPIC_BASE_URL and the key)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKFLOW_", "ANTHROPIC_"))}
    env.update(GIT_ENV, HOME=str(tmp_path / "home"), ANTHROPIC_API_KEY="sk-stand-in", ANTHROPIC_BASE_URL=model.url)
    if clis:
        env["PATH"] = f"{cli_bin()}:{env['PATH']}"
    r = subprocess.run(
        [sys.executable, "-m", "workflow", "init"], cwd=proj, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert ("backend claude-code" if clis else "backend anthropic") in r.stdout, r.stdout
    toml = proj / "workflow.toml"
    toml.write_text(re.sub(r"(?m)^port = \d+", f"port = {free_port()}", toml.read_text()))  # this test's own port
    return proj, env


def app_of(proj: Path) -> App:
    return App(load_config(proj / "workflow.toml", env={}))


@spawning
def git(proj: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=proj, capture_output=True, text=True, check=True).stdout


def copies(app: App) -> list[tuple[str, bytes, Path]]:
    """(mailbox, raw, path) of every stored copy."""
    out = []
    for box in sorted(p for p in app.config.mail_root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for sub in ("new", "cur"):
            d = box / sub
            if d.is_dir():
                out.extend((box.name, f.read_bytes(), f) for f in sorted(d.iterdir()))
    return out


def unread_triggers(app: App) -> list[str]:
    """Unread mail that would wake an agent role (the only thing that wakes one)."""
    out = []
    for box, raw, path in copies(app):
        role = app.roster.roles.get(box)
        if role is None or not role.takes_mail or role.mode == "human":
            continue
        seen = path.parent.name == "cur" and "S" in path.name.rsplit(":2,", 1)[-1]
        if not seen and parse(raw).event in role.triggers:
            out.append(f"{box}: {parse(raw).message_id}")
    return out


@spawning
@contextmanager
def up(proj: Path, env: dict[str, str], app: App, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`workflow up ARGS`, its SMTP port answering; stopped with SIGTERM at the end (exit 0)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workflow", "up", *args], cwd=proj, env=env, stdout=out, stderr=out
        )
    try:
        end = time.monotonic() + 30
        while True:
            try:
                smtplib.SMTP("127.0.0.1", app.config.smtp.port, timeout=2).quit()
                break
            except OSError:
                assert time.monotonic() < end and proc.poll() is None, log.read_text()
                time.sleep(0.05)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()[-3000:]


@spawning
def ask(proj: Path, env: dict[str, str]) -> None:
    """The person's request: a question to spec-writer, sent as `user` through the server."""
    r = subprocess.run(
        [sys.executable, "-c", "from workflow.cli.entry import notify; notify()"]
        + ["--via", "smtp", "--from", "user", "question", "specs/proposed/rate-limit.md", "spec-writer"]
        + [f"QUESTION={REQUEST}"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


@spawning
def until_done(
    proj: Path,
    app: App,
    model: PipelineModel,
    proc: subprocess.Popen[bytes],
    log: Path,
    t0: float,
    timeout: float = 150,
    also: Callable[[], bool] = lambda: True,
) -> float:
    """Wait until every artifact is in done/, nothing runs or waits to, and ``also`` holds; the
    seconds since ``t0``. A pipeline that stops on the way fails, saying where."""

    def idle() -> bool:
        with Tasks(app.config.state.tasks) as tasks:
            live = tasks.list((TaskStatus.QUEUED, TaskStatus.RUNNING))
        return not live and not unread_triggers(app)

    end = time.monotonic() + timeout
    while not (idle() and all((proj / "specs" / "done" / f"{a}.md").exists() for a in ARTIFACTS) and also()):
        assert proc.poll() is None, log.read_text()[-4000:]
        if time.monotonic() > end:
            with Tasks(app.config.state.tasks) as tasks:
                failed = [(t.role, t.error) for t in tasks.list((TaskStatus.FAILED,))]
            raise AssertionError(
                f"the pipeline stopped: {sorted(p.relative_to(proj).as_posix() for p in (proj / 'specs').rglob('*.md'))}; "
                f"refusals {model.refusals}; failed runs {failed}; runs {model.runs()}\n{log.read_text()[-4000:]}\n"
                + "\n".join(f.read_text()[-1500:] for f in sorted(app.config.state.runs.glob("task-*.log")))
            )
        time.sleep(0.1)
    return time.monotonic() - t0


def check_invariants(proj: Path, app: App, model: PipelineModel) -> None:
    """What a clean pipeline keeps: every run succeeded with no refusal, every message stored once
    per recipient and handed to exactly one run of each agent role it triggers, one thread per
    conversation, only legal moves each committed once by a role allowed to make it, authored as
    it, nothing left uncommitted, nothing left to wake."""
    with Tasks(app.config.state.tasks) as tasks:
        every = tasks.list()
    assert every and all(t.status == TaskStatus.COMPLETED for t in every), [(t.role, t.status, t.error) for t in every]
    assert model.refusals == [], model.refusals

    stored: dict[str, list[str]] = {}
    for box, raw, _ in copies(app):
        stored.setdefault(str(parse(raw).message_id), []).append(box)
    assert all(len(boxes) == len(set(boxes)) for boxes in stored.values()), stored
    handed: dict[tuple[str, str], int] = {}
    for c in model.calls:
        if c.first:
            for mid in re.findall(r"^## NEW .*\n.*\nMessage-ID: (<[^>\s]+>)", c.prompt, re.M):
                handed[(c.role, mid)] = handed.get((c.role, mid), 0) + 1
    assert all(n == 1 for n in handed.values()), handed
    for box, raw, _ in copies(app):
        role = app.roster.roles.get(box)
        if role is not None and role.mode != "human" and parse(raw).event in role.triggers:
            assert handed.get((box, str(parse(raw).message_id))) == 1, (box, parse(raw).event)

    question = [parse(raw) for _, raw, _ in copies(app) if parse(raw).event == "question"]
    assert len(question) == 1
    by_artifact: dict[str, set[str]] = {}
    for _, raw, _ in copies(app):
        m = parse(raw)
        root = (m.references or [str(m.message_id)])[0]
        if root == question[0].message_id or m.event == "status-update" or not m.artifacts:
            continue  # the person's request (and its answer) and the closing notes are threads of their own
        name = m.artifacts[0].rsplit("/", 1)[-1]
        by_artifact.setdefault(name, set()).add(root)
    assert {k: len(v) for k, v in by_artifact.items()} == {
        "rate-limit.md": 1,
        "rate-limit-skeleton.md": 1,
        "rate-limit-tests.md": 1,
    }
    answers = [parse(raw) for box, raw, _ in copies(app) if box == "user" and parse(raw).event == "answer"]
    assert len(answers) == 1 and answers[0].in_reply_to == question[0].message_id

    moves = []
    for line in git(
        proj,
        "log",
        "--reverse",
        "--format=%an%x09%(trailers:key=Workflow-Transition,valueonly,separator=)%x09%(trailers:key=Workflow-Role,valueonly,separator=)",
    ).splitlines():
        author, transition, role = (line.split("\t") + ["", ""])[:3]
        if not transition:
            continue
        src, dst = transition.split(" -> ")
        a, b = src.split("/")[1], dst.split("/")[1]
        assert author == role, line
        owned = role_moves(app.roster, role)
        human = app.roster.roles.get(role) is not None and app.roster.roles[role].mode == "human"
        assert human or (owned is not None and ((a, b) in owned or ("*", b) in owned)), line
        assert (a, b) in app.config.transitions or ("*", b) in app.config.transitions, line
        moves.append((src.rsplit("/", 1)[-1], a, b))
    assert sorted(moves) == sorted(
        (f"{name}.md", a, b)
        for name in ARTIFACTS
        for a, b in (("proposed", "todo"), ("todo", "doing"), ("doing", "done"))
    )
    left = [ln for ln in git(proj, "status", "--porcelain", "-uall", "--", "specs").splitlines() if ln.endswith(".md")]
    assert left == []
    assert unread_triggers(app) == []
