"""docs/ command blocks, run as pasted: each page with ```bash blocks is run by a test, as
docs/mail-clients.md and docs/team.md are; the pages not run yet are named here, so a new page
cannot join them unnoticed (issue 50, item 5)."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers.docs import BLOCK, blocks, run
from helpers.fake_anthropic import FakeAnthropic, tool_use
from helpers.git import GIT_ENV
from workflow.core.events import EVENTS
from workflow.mail.message import parse
from workflow.policy.guardrails import RULES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUN = {  # page → the test file that runs its blocks
    "mail-clients.md": "tests/ops/test_mail_clients.py",
    "team.md": "tests/ops/test_team_page.py",
    "guardrails-and-events.md": "tests/ops/test_docs_blocks.py",
    "reading-mail.md": "tests/ops/test_docs_blocks.py",
    "roles-and-panels.md": "tests/ops/test_docs_blocks.py",
    "artifacts.md": "tests/ops/test_docs_blocks.py",
    "operations.md": "tests/ops/test_docs_blocks.py",
    "mail-server.md": "tests/ops/test_docs_blocks.py",
    "agentd.md": "tests/ops/test_docs_blocks.py",
    "cockpit.md": "tests/ops/test_docs_blocks.py",
    "running-roles.md": "tests/ops/test_docs_blocks.py",
    "performance.md": "tests/ops/test_docs_blocks.py",  # each line at a small size: SMALL
    "bridges.md": "tests/ops/test_docs_blocks.py",
    "hosts.md": "tests/ops/test_docs_blocks.py",
}
NOT_YET: set[str] = set()  # pages whose blocks are not run yet (each named with why)


def test_every_page_with_command_blocks_is_run_by_a_test_or_named_as_not_yet() -> None:
    with_blocks = {p.name for p in DOCS.glob("*.md") if BLOCK.search(p.read_text())}
    assert with_blocks == set(RUN) | NOT_YET, with_blocks ^ (set(RUN) | NOT_YET)
    assert not set(RUN) & NOT_YET
    for page, test in RUN.items():
        assert page in (ROOT / test).read_text(), (page, test)


def _said(lines: list[str], out: dict[str, str], start: str) -> str:
    """What the one line starting with ``start`` printed."""
    (line,) = [line for line in lines if line.startswith(start)]
    return out[line]


def _unread(tmp_path: Path, role: str, about: str = "") -> list[str]:
    """The event types of ``role``'s unread mail in the test's home (about an artifact named so)."""
    found = [parse(f.read_bytes()) for f in (tmp_path / f"home/.maildir/workflow/{role}/new").iterdir()]
    return sorted(str(m.event) for m in found if not about or any(about in a for a in m.artifacts))


def _env(tmp_path: Path) -> dict[str, str]:
    """A user's shell: the venv's commands on PATH, a home and a temporary directory of the test's."""
    (tmp_path / "tmp").mkdir()
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")},
        **GIT_ENV,
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }


def test_the_guardrails_and_events_page_runs_as_pasted(tmp_path: Path) -> None:
    env = _env(tmp_path)
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


def test_the_reading_mail_page_runs_as_pasted_and_the_demo_tells_its_whole_story(tmp_path: Path) -> None:
    sections = blocks(DOCS / "reading-mail.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))
    at = {title: [out[line] for line in body] for title, body in sections.items()}
    inbox, narrowed, as_json = at["`workflow inbox ROLE` — what to read next"]
    assert "spec-reviewer: 1 unread message in 1 thread" in inbox and "[REVIEW REQUEST] user-auth" in inbox
    assert "review-request" in narrowed
    (thread,) = json.loads(as_json)["threads"]
    assert [m["event"] for m in thread["messages"]] == ["clarification-request"]  # --all: what spec-writer got
    (thread,) = at["`workflow thread MESSAGE-ID --as ROLE` — a thread as a Markdown transcript"]
    assert "# Thread: [REVIEW REQUEST] user-auth ready for review" in thread and "Should the refresh" in thread
    unread, again = at["`workflow read MESSAGE-ID… --as ROLE` — read mail without a mail client"]
    assert "Should the refresh token expire?" in unread and "Should the refresh token expire?" in again
    (found,) = at["`workflow search TEXT [--as ROLE]` — full-text search"]
    assert "clarification-request" in found or "CLARIFICATION" in found, found
    roster, route, verdict = at["`workflow roster` and `workflow route ADDRESS [--from ROLE]` — who reaches whom"]
    assert "spec-reviewer" in roster and "mailboxes: spec-writer, spec-reviewer" in route
    assert "from test-writer: allowed" in verdict
    (demo,) = at["`workflow demo` — the whole flow in a scratch project"]
    scratch = Path(re.search(r"^Scratch project: (\S+)", demo, re.M)[1])  # type: ignore[index]
    assert scratch.parent == tmp_path / "tmp"  # $TMPDIR's, as a user's temporary directory
    assert "spec-reviewer: 1 unread message in 1 thread" in demo
    assert "# Thread: [REVIEW REQUEST] user-auth ready for review" in demo
    assert "refused: SMTP server refused a recipient: 550 5.7.1 rule internal-members-only" in demo
    assert (scratch / "specs" / "todo" / "user-auth.md").exists()
    assert "agentd: " in demo and re.search(r"completed +spec-reviewer task 1 ran=True", demo), demo
    assert "run-role --with-email spec-reviewer (spawned by agentd)" in demo
    # the reviewer's approval of user-auth and the panel's of search, each handed on (hands_off)
    handed = [parse(f.read_bytes()) for f in (scratch / "mail" / "test-writer" / "new").iterdir()]
    assert sorted((m.event, m.artifacts[0].rsplit("/", 1)[-1]) for m in handed) == [
        ("approval", "search.md"),
        ("approval", "user-auth.md"),
        ("status-update", "user-auth.md"),  # the reviewer's move by its tool, told as every move is (issue 48)
    ]
    for noise in ("InotifyEmitter", "Traceback", "1 artifacts", "problem(s)"):  # nothing but the story
        assert noise not in demo, noise


PANELS = "Panels: independent reviews by construction (`workflow panel`)"


def test_the_message_flow_examples_and_the_panels_run_as_pasted_and_each_reaches_its_roles(tmp_path: Path) -> None:
    sections = blocks(DOCS / "roles-and-panels.md")
    assert list(sections) == ["Message flow patterns", PANELS], list(sections)
    lines = [*sections["Message flow patterns"], *sections[PANELS]]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))

    said = functools.partial(_said, lines, out)

    reviewer = said("run-role --dry-run --with-email spec-reviewer")
    assert "[REVIEW REQUEST] user-auth ready for review" in reviewer and "Focus on error handling" in reviewer
    assert "nothing run, marked or sent" in reviewer
    assert re.fullmatch(r"<[^>]+>\n", said('workflow-notify --from spec-writer --in-reply-to "$question"'))
    assert "(proposed → todo)" in said("workflow move user-auth todo")
    copied = said("run-role --dry-run --with-email test-writer")
    assert (
        "Re: [REVIEW REQUEST] user-auth ready for review" in copied
        and "Next roles: skeleton-writer,test-writer" in copied
    )
    assert "implementer: blocked" in said("git mv")

    # the examples' mail: about user-auth (the panels' is about search and rate-limit)
    got = functools.partial(_unread, tmp_path, about="user-auth")

    # each message reached its roles; a dry run marks nothing read
    assert got("spec-reviewer") == ["answer", "review-request"]
    assert got("spec-writer") == ["approval", "clarification-request"]
    # the move to doing/ is told to the roles that work on it, the move to blocked/ to the coordinator
    assert got("skeleton-writer") == got("test-writer") == ["approval", "status-update"]
    assert got("coordinator") == ["blocker-report", "status-update"]
    assert got("platform-lead") == ["blocker-report"]  # copied: a blocker-report about an artifact in blocked/
    assert got("implementer") == ["answer", "status-update", "status-update"]
    thread = said('workflow thread "$blocker"')
    assert "External API library incompatible" in thread and "Use async interfaces throughout." in thread
    assert (tmp_path / "flow-demo" / "specs" / "blocked" / "user-auth.md").exists()
    # the panels: sealed, unsealed, decided 2–1 and moved once; a spec written section by section
    review = said("workflow panel review")
    assert "(sealed)" in review and "approve (majority: 2 approve, 1 reject, 0 revise) sent to user" in review, review
    status = said("workflow panel status")
    assert re.search(r"gemini +reject", status) and "artifact moved" in status, status
    assert (tmp_path / "flow-demo" / "specs" / "todo" / "search.md").exists()
    wrote = said("workflow panel write")
    assert "integrated specs/proposed/rate-limit.md and sent the review-request to spec-reviewer-panel" in wrote
    assert "## Errors" in (tmp_path / "flow-demo" / "specs" / "proposed" / "rate-limit.md").read_text()
    assert "0 answered" in said("workflow panel answer")


def test_the_artifacts_page_runs_as_pasted_from_init_to_trust(tmp_path: Path) -> None:
    sections = blocks(DOCS / "artifacts.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))
    at = {title.split(" — ")[0]: [out[line] for line in body] for title, body in sections.items()}
    made, again = at["`workflow init [DIR]`"]
    assert "already initialized; nothing changed" in again, again
    project = tmp_path / "my-project"
    for root in ("specs", "vision", "roadmap"):
        assert (project / root / "done" / ".gitkeep").exists(), root
    assert (project / "email-templates").is_dir()
    _, _, approve, start, block, reject = at["`workflow move ARTIFACT STATE --as ROLE`"]
    assert "spec-reviewer: approve user-auth (proposed → todo)" in approve
    assert "delivered directly: spec-writer, skeleton-writer, test-writer" in approve, approve
    assert "implementer: start user-auth (todo → doing)" in start
    assert "(doing → blocked)" in block and "delivered directly: coordinator, platform-lead" in block, block
    assert "specs/proposed/search.md stays in proposed/" in reject and "delivered directly: spec-writer" in reject
    board, history, as_json = at["`workflow status [ARTIFACT]`"]
    assert re.search(r"specs/proposed/search\.md +rejection from spec-reviewer", board), board
    assert re.search(r"specs/blocked/user-auth\.md +blocker-report from implementer", board), board
    assert "2 artifacts, 0 flagged" in board
    assert "moved to blocked/ by implementer" in history and "approval" in history and "blocker-report" in history
    assert [a["path"] for a in json.loads(as_json)["states"]["blocked"]] == ["specs/blocked/user-auth.md"]
    assert at["`workflow doctor [--fix]`"] == ["no problems found\n", "no problems found\n"]
    _, diff, trusted = at["`workflow trust`"]
    assert "+- Keep specs short." in diff and "approved 1 change(s)" in trusted, (diff, trusted)


# No systemd user manager runs here: this systemctl checks what it is asked to enable — an installed
# unit template, its instance a project directory — and records it; the units themselves are
# verified by systemd-analyze (tests/ops/test_packaging.py).
SYSTEMCTL = """#!/bin/sh
set -eu
[ "$1 $2 $3" = "--user enable --now" ] || { echo "systemctl stand-in: unexpected $*" >&2; exit 2; }
unit=$4; template="${unit%%@*}@.service"; instance="${unit#*@}"; instance="${instance%.service}"
[ -f "$HOME/.config/systemd/user/$template" ] || { echo "Unit $template not found." >&2; exit 5; }
dir=$(systemd-escape --unescape --path "$instance")
[ -f "$dir/workflow.toml" ] || { echo "$dir is no project" >&2; exit 1; }
echo "$template $dir" >> "$HOME/enabled"
"""


@pytest.mark.skipif(
    shutil.which("systemd-escape") is None, reason="systemd is not installed (scripts/system-packages installs it)"
)
def test_the_operations_page_runs_as_pasted(tmp_path: Path) -> None:
    env = _env(tmp_path)
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "systemctl").write_text(SYSTEMCTL)
    (shims / "systemctl").chmod(0o755)
    env["PATH"] = f"{shims}:{env['PATH']}"
    sections = blocks(DOCS / "operations.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, ROOT, env, timeout=120), strict=True))
    home = tmp_path / "home"
    project = home / "my-project"
    units = sorted(p.name for p in (home / ".config/systemd/user").iterdir())
    assert units == ["workflow-agentd@.service", "workflow-smtpd@.service", "workflow-web@.service"]
    assert (home / "enabled").read_text().splitlines() == [f"{u} {project}" for u in (units[1], units[0], units[2])]
    (completions,) = [out[line] for line in lines if line.startswith("complete -p")]
    for command in ("workflow", "workflow-notify", "run-role"):
        assert re.search(rf"^complete .*-F \S+ {re.escape(command)}$", completions, re.M), completions
    assert "complete" in (home / ".config/fish/completions/workflow.fish").read_text()
    assert "[database]" in (home / ".notmuch-config-workflow").read_text()
    assert "bob" in (home / ".muttrc-workflow").read_text()


@pytest.mark.skipif(
    shutil.which("swaks") is None, reason="swaks is not installed (scripts/system-packages installs it)"
)
def test_the_mail_server_page_runs_as_pasted_and_every_message_lands(tmp_path: Path) -> None:
    sections = blocks(DOCS / "mail-server.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))

    said = functools.partial(_said, lines, out)

    assert "Subject: [REVIEW REQUEST] user-auth ready for review" in said("workflow-notify --stdout")
    assert re.fullmatch(r"<[^>]+>\n", said("workflow-notify --from spec-reviewer approval"))
    assert "250 2.0.0" in said("swaks") and "delivered" in said("swaks")
    project = tmp_path / "serving-demo"
    log = (project / "smtpd.log").read_text()
    assert "listening on 127.0.0.1:2525" in log and "delivered to spec-reviewer" in log and "stopped:" in log
    workers = (project / "workers.log").read_text()
    assert (
        "(4 workers" in workers and "from spec-writer@workflow.local" in workers and "stopped: 1 delivered" in workers
    )

    got = functools.partial(_unread, tmp_path)

    assert got("spec-reviewer") == ["answer", "question", "review-request"]  # the last two through the servers
    assert got("spec-writer") == ["approval", "clarification-request"]
    assert got("skeleton-writer") == ["approval", "status-update"]


def test_the_agentd_page_runs_as_pasted_a_failed_role_paused_told_resumed_and_run_again(tmp_path: Path) -> None:
    sections = blocks(DOCS / "agentd.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))

    said = functools.partial(_said, lines, out)

    assert "agentd: not running" in said("agentd status ||") and "(exit 3)" in said("agentd status ||")
    (status,) = [out[line] for line in lines if line.startswith("agentd status ") and "#" in line]
    assert re.search(r"^agentd: running \(pid \d+", status, re.M), status
    assert re.search(r"^  spec-writer +1 consecutive failures .*the model API is down", status, re.M), status
    assert re.search(r"task 1 +spec-writer +dead-lettered scripted step 1: the model API is down", status), status
    assert "spec-writer: resumed" in said("agentd resume") and "task 1 (spec-writer) queued" in said("agentd requeue")
    log = tmp_path / "home/.maildir/workflow/.workflow/agentd.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    done = [e for e in events if e["event"] == "completed"]
    assert {(e["role"], e["task"]) for e in done} >= {("spec-writer", 1)}, done
    # the failure was told to the coordinator, whose run took it
    told = [parse(f.read_bytes()) for f in (tmp_path / "home/.maildir/workflow/coordinator/cur").iterdir()]
    assert [m.event for m in told] == ["blocker-report"], told
    assert "stopped" in (tmp_path / "agentd-demo" / "up.log").read_text()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (scripts/system-packages installs it)")
def test_the_cockpit_page_runs_as_pasted_and_the_owners_link_opens_the_board(tmp_path: Path) -> None:
    sections = blocks(DOCS / "cockpit.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))
    (board,) = [out[line] for line in lines if line.startswith("curl")]
    assert board == "<title>board · workflow</title>\n", board  # logged in: the login page is titled otherwise
    project = tmp_path / "cockpit-demo"
    first = re.findall(r"login\?once=\S+", (project / "web.out").read_text())
    assert len(first) == 1 and re.search(
        r"^workflow web: http://127\.0\.0\.1:\d+/", (project / "web.out").read_text(), re.M
    )
    up = (project / "up.out").read_text()
    assert "login link" in up and "smtpd: stopped" in up, up
    web, up_stop = [out[line] for line in lines if line.startswith("kill")]
    assert web == "stopped (exit 143)\n", web  # SIGTERM: cleaned up, then exit 128 + 15, as a command's
    assert up_stop in ("", "stopped (exit 143)\n"), up_stop


def test_the_running_roles_page_runs_as_pasted_a_scripted_and_an_api_run(tmp_path: Path) -> None:
    sections = blocks(DOCS / "running-roles.md")
    lines = [line for body in sections.values() for line in body]
    with FakeAnthropic() as api:  # the Messages API, at the wire
        api.add(tool_use("finish", {"status": "done", "summary": "Starting on user-auth next."}))
        env = {**_env(tmp_path), "ANTHROPIC_API_KEY": "sk-stand-in", "ANTHROPIC_BASE_URL": api.url}
        out = dict(zip(lines, run(lines, tmp_path, env, timeout=120), strict=True))
        asked = api.requests

    said = functools.partial(_said, lines, out)

    dry = said("run-role --dry-run")
    assert "[REVIEW REQUEST] user-auth ready for review" in dry and "nothing run, marked or sent" in dry
    assert "Reviewed: complete and testable." in said("run-role --with-email --backend scripted")
    api_run = said("run-role --with-email --backend anthropic")
    assert "implementer: run succeeded" in api_run and "Starting on user-auth next." in api_run, api_run
    (request,) = asked
    assert "# Role: implementer" in json.dumps(request) and "user-auth" in json.dumps(request)
    box = tmp_path / "home/.maildir/workflow"
    assert not list((box / "spec-reviewer/new").iterdir())  # the scripted run read its mail
    assert not list((box / "implementer/new").iterdir())  # so did the API run


# docs/performance.md's benchmarks, each line as it stands but at a small size: its sizes replaced,
# and the sizes it leaves at their (large) defaults given
SMALL = {"--messages": "300", "--rounds": "1", "--runs": "2"}
SMALL_DEFAULTS = {  # the sizes a line leaves at their (large) defaults
    "wake": {"--messages": "5", "--copies": "3", "--burst": "20", "--big": "0"},
    "chaos": {"--schedules": "1"},
    "ingest": {"--runs": "1"},  # one run of each client: two Postfix instances started, not ten
}
BENCHES = blocks(DOCS / "performance.md")["Benchmarks"]
# a line the suite leaves to the bench itself, and why
NOT_IN_SUITE = {
    "scripts/bench/pipeline --backend": "12 runs of the real Claude Code and the anthropic rounds beside them: "
    "30 s alone at one round, 110 s beside the suite (the --rounds line runs the same script)",
}


def _small(line: str) -> list[str]:
    words = shlex.split(line.split("#", 1)[0])
    for i, w in enumerate(words[:-1]):
        if w in SMALL:
            words[i + 1] = SMALL[w]
    unset = SMALL_DEFAULTS.get(Path(words[1]).name, {})
    return [*words, *[x for k, v in unset.items() if k not in words for x in (k, v)]]


def _name(line: str) -> str:
    return " ".join(shlex.split(line.split("#")[0])[1:3])


def test_every_benchmark_line_is_run_below_or_said_why_not() -> None:
    assert BENCHES and set(NOT_IN_SUITE) <= {_name(b) for b in BENCHES}, set(NOT_IN_SUITE)


@pytest.mark.parametrize("line", [b for b in BENCHES if _name(b) not in NOT_IN_SUITE], ids=_name)
def test_each_benchmark_of_the_performance_page_runs_and_prints_its_table(line: str) -> None:
    argv = _small(line)
    assert argv[0] == ".venv/bin/python" and (ROOT / argv[1]).exists(), argv
    # a home of its own and the system's temporary directory: short, as a run's tool socket path must be
    home = tempfile.mkdtemp(prefix="bench-home-", dir="/tmp")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("WORKFLOW_", "TMPDIR"))}, "HOME": home}
    try:
        r = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert r.returncode == 0, f"{argv}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    said = r.stdout + r.stderr
    # its ratio against a baseline of the same run (the chaos harness: its promises, each held)
    assert re.search(r"baseline|÷|×|every promise held", said), said[-2000:]
    assert "Traceback" not in said, said[-3000:]


def test_the_bridges_page_runs_as_pasted_a_slack_request_asked_by_mail_answered_by_agentd(tmp_path: Path) -> None:
    sections = blocks(DOCS / "bridges.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=180), strict=True))
    said = functools.partial(_said, lines, out)
    assert "[QUESTION]" in said("workflow inbox coordinator") and "slack+c1-100-1@workflow.local" in said(
        "workflow inbox coordinator"
    )
    log = said('grep "task 1"')
    assert "task 1: asked coordinator" in log and "task 1: completed by coordinator@workflow.local" in log, log
    demo = tmp_path / "bridges-demo"
    store = demo / "slack.log"
    assert "chat_postMessage failed" in store.read_text()  # Slack is unreachable here: said, not fatal
    answer = [parse(f.read_bytes()) for f in (tmp_path / "home/.maildir/workflow/bridge-slack/cur").iterdir()]
    assert [m.event for m in answer] == ["answer"]  # read by the bridge once it posted it
    assert "slack" in said("workflow bridge list") and "gmail" in said("workflow bridge list")
    for page in (
        "workflow bridge gmail --help",
        "workflow bridge slack --help",
        "workflow bridge rebuild-thread --help",
    ):
        assert "Example" in said(page), page


def test_the_hosts_page_runs_as_pasted_a_role_placed_and_this_machine_named(tmp_path: Path) -> None:
    sections = blocks(DOCS / "hosts.md")
    lines = [line for body in sections.values() for line in body]
    out = dict(zip(lines, run(lines, tmp_path, _env(tmp_path), timeout=120), strict=True))

    def said(pattern: str) -> str:
        (line,) = [line for line in lines if re.match(pattern, line)]
        return out[line]

    assert "implementer lives on build" in said(r"workflow host build --place implementer ")
    assert "this machine is host build: its listeners bind 127.0.0.3" in said(r"workflow host build +#")
    roster = said(r"workflow roster ")
    assert "Hosts (2; this is build):" in roster and re.search(r"^  implementer +async +on build ", roster, re.M)
    assert re.search(r"^  spec-writer +async +on hub ", roster, re.M), roster
    assert re.search(
        r"^this is build\n  hub .*\n  build .* its agentd runs 1 role\(s\)$", said(r"workflow host +#"), re.M
    )
    assert (tmp_path / "home/.maildir/workflow/.workflow/host").read_text() == "build\n"
    assert re.search(
        r"^secret \(shown once; for host hub's relay to this host\): \S{20,}$", said(r"workflow users peer"), re.M
    )
    assert ":@hub\n" in (tmp_path / "home/.config/workflow/users").read_text()
    transport = said(r"workflow postfix ")
    assert re.search(r"^\S+@workflow\.local smtp:\[127\.0\.0\.[23]\]:\d+$", transport, re.M), transport
