"""A bridge's question is ordinary mail to agentd: a bridge address asks, agentd runs the role on
that conversation's mail alone, and the answer (or, once agentd gives up, a blocker-report) comes
back to the bridge's mailbox. One session per conversation; a SIGKILL of agentd loses nothing
and answers nothing twice."""

from __future__ import annotations

import signal
from pathlib import Path

from helpers.agentd import Daemon, project, prompts
from helpers.project import Project
from workflow.delivery.notify import NotifyRequest
from workflow.delivery.transport import make_transport
from workflow.mail.message import parse
from workflow.policy.roster import bridge_mailbox

SLACK = '\n[bridges.slack]\nbot_user_id = "UBOT"\n'


def ask(p: Project, tag: str, role: str, question: str) -> str:
    """The bridge's question, as the Slack bridge composes it: From its address for one thread."""
    app = p.app
    c = app.compose(
        NotifyRequest(
            "question",
            ("specs/*/user-auth.md",),
            (role,),
            f"slack+{tag}",
            None,
            {"QUESTION": question, "CONTEXT": "From Slack"},
        )
    )
    c.send(make_transport(app.config, app.deliverer))
    return c.message_id


def script(p: Project, role: str, steps: str) -> None:
    (p.dir / "scripted").mkdir(exist_ok=True)
    (p.dir / "scripted" / f"{role}.toml").write_text(steps)


def back(p: Project) -> list[tuple[str | None, str | None, str]]:
    """(event, In-Reply-To, body) of each mail in the Slack bridge's mailbox."""
    box = p.app.config.mail_root / bridge_mailbox("slack")
    out = []
    for f in sorted([*box.glob("new/*"), *box.glob("cur/*")]):
        m = parse(f.read_bytes())
        out.append((m.event, m.in_reply_to, f.read_text()))
    return out


def test_a_bridge_address_is_routed_to_its_mailbox_and_only_configured_bridges_have_one(tmp_path: Path) -> None:
    p = project(tmp_path, ["coordinator"], extra=SLACK)
    r = p.app.roster
    assert r.route("slack+c1-100-1@workflow.local").kind == "bridge"
    assert r.route("slack+c1-100-1@workflow.local").mailboxes == ("bridge-slack",)
    assert r.sender("slack+c1-100-1@workflow.local") == "slack+c1-100-1"
    assert r.bridge_of("gmail+x@workflow.local") == ""  # not configured here
    assert r.bridge_of("slack+../x@workflow.local") == ""


def test_agentd_answers_each_conversation_on_its_own_mail_and_a_session_goes_on_per_thread(tmp_path: Path) -> None:
    p = project(tmp_path, ["coordinator"], extra=SLACK)
    # blocker-report and question are the coordinator's triggers; its own mail runs apart from a bridge's
    script(p, "coordinator", '[[step]]\nsay = "ANSWERED"\n')
    d = Daemon(p)
    try:
        q1 = ask(p, "c1-100-1", "coordinator", "Summarize the week ALPHA")
        q2 = ask(p, "c1-200-1", "coordinator", "What is a Maildir BRAVO?")
        d.wait_for(lambda: len(back(p)) == 2, "both answers")
        answers = {irt: body for ev, irt, body in back(p) if ev == "answer"}
        assert set(answers) == {q1, q2}, back(p)
        assert all("ANSWERED" in b for b in answers.values())
        said = prompts(p, "coordinator")
        assert len(said) == 2 and all(("ALPHA" in x) != ("BRAVO" in x) for x in said), said
        assert all("Asked through the slack bridge" in x for x in said)
        started = [e for e in d.events("started") if "task" in e]
        assert len(started) == 2  # one run per conversation
        # The status lists them as ordinary runs, each naming its conversation.
        queued = [e for e in d.events("queued") if "asked_by" in e]
        assert sorted(e["asked_by"] for e in queued) == [
            "slack+c1-100-1@workflow.local",
            "slack+c1-200-1@workflow.local",
        ]
    finally:
        d.stop()


AGENT = """#!/bin/sh
cat >/dev/null
workflow finish done >/dev/null || exit 9
if [ "$1" = "--resume" ]; then
  [ -f "$(dirname "$0")/resume-fails" ] && { echo "no such session $2" >&2; exit 1; }
  printf '{"session_id": "%s", "result": "resumed %s"}\\n' "$2" "$2"
else
  echo '{"session_id": "sess-1", "result": "a new session"}'
fi
"""


def test_a_follow_up_resumes_the_conversations_session_or_starts_a_new_one(tmp_path: Path) -> None:
    agent = tmp_path / "ad" / "agent.sh"  # in the project: what a run sees
    p = project(
        tmp_path,
        ["coordinator"],
        extra=SLACK
        + f'\n[backends.command]\nargv = ["sh", "{agent}"]\nresume = ["--resume", "{{session}}"]\ncontain = "none"\n',
    )
    agent.write_text(AGENT)
    agent.chmod(0o755)
    cfg = p.dir / "workflow.toml"
    cfg.write_text(cfg.read_text().replace('backend = "scripted"', 'backend = "command"'))
    d = Daemon(p)

    def answer(q: str) -> str:
        d.wait_for(lambda: any(irt == q for _, irt, _ in back(p)), f"the answer to {q}")
        return next(body for _, irt, body in back(p) if irt == q)

    try:
        first = answer(ask(p, "c1-300-1", "coordinator", "first"))
        assert "a new session" in first and "X-Workflow-Session: sess-1" in first
        then = answer(ask(p, "c1-300-1", "coordinator", "and then?"))
        assert "resumed sess-1" in then and "X-Workflow-Resumed: sess-1" in then
        other = answer(ask(p, "c1-999-1", "coordinator", "another thread"))  # a session of its own
        assert "a new session" in other and "X-Workflow-Resumed" not in other
        (p.dir / "resume-fails").write_text("")
        year = answer(ask(p, "c1-300-1", "coordinator", "and the year?"))
        assert "a new session" in year, year
        logs = "".join(f.read_text() for f in p.app.config.state.runs.glob("task-*.log"))
        assert "resuming session sess-1 failed" in logs
    finally:
        d.stop()


def test_a_run_that_keeps_failing_is_told_to_the_bridge_once_agentd_gives_up(tmp_path: Path) -> None:
    p = project(tmp_path, ["implementer"], extra="max_attempts = 1\n" + SLACK)
    script(p, "implementer", '[[step]]\nfail = "could not build"\n')
    d = Daemon(p)
    try:
        q = ask(p, "c1-400-1", "implementer", "implement it")  # no trigger of the implementer's: a bridge asks
        d.wait_for(lambda: len(back(p)) == 1, "the failure told to the bridge")
        ((event, irt, body),) = back(p)
        assert (event, irt) == ("blocker-report", q) and "could not build" in body
    finally:
        d.stop()


def test_a_sigkill_of_agentd_mid_run_answers_once(tmp_path: Path) -> None:
    p = project(tmp_path, ["coordinator"], extra=SLACK)
    script(p, "coordinator", '[[step]]\nsleep = 2.0\n[[step]]\nsay = "ONCE"\n')
    d = Daemon(p)
    q = ask(p, "c1-500-1", "coordinator", "take your time")
    d.wait_for(lambda: bool(d.events("started")[1:]), "the run to start")
    d.stop(signal.SIGKILL)
    d2 = Daemon(p)
    try:
        d2.wait_for(lambda: len(back(p)) >= 1 and d2.idle(), "the answer after the restart", timeout=60)
        assert [(ev, irt) for ev, irt, _ in back(p)] == [("answer", q)]
    finally:
        d2.stop()
