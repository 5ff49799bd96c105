"""Issue 49: a run you can read — the real Claude Code, woken by a real agentd against a stand-in
model, approves a spec; its page in a real `workflow web` shows the tool calls and the move read
from Claude Code's own transcript, its duration, tokens and cost and its trigger mail; a person
who does not read the role's mail gets 404, as for a run that does not exist."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from helpers.agent_clis import agentd_until_approval, approve_turns, fresh_project, needs_claude
from helpers.agentd import wait_until
from helpers.fake_anthropic import FakeAnthropic
from helpers.sandboxing import needs_bwrap
from helpers.web import Client


@needs_bwrap
@needs_claude
def test_a_claude_code_runs_page_shows_its_calls_and_moves_and_a_non_member_gets_404(tmp_path: Path) -> None:
    f = fresh_project(tmp_path)
    request = f.notify("review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    with FakeAnthropic(cli=True) as api:
        approve_turns(api, request)
        env = f.env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-x")
        log = agentd_until_approval(f, env)
    assert f.events("spec-writer") == ["approval"], log
    (done,) = json.loads(f.run("agentd", "status", "--json").stdout)["recent"]
    task = int(done["task"])
    workflow = str(Path(sys.executable).parent / "workflow")
    # carol, a person who takes spec-writer: she does not read spec-reviewer's mail
    r = subprocess.run(
        [workflow, "users", "add", "carol", "--role", "spec-writer", "--password-stdin"],
        cwd=f.dir,
        env=f.env(),
        input="carol-password\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr

    weblog = tmp_path / "web.log"
    with open(weblog, "wb") as out:
        web = subprocess.Popen(
            [workflow, "web", "--port", "0"], cwd=f.dir, env=f.env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: "login?once=" in weblog.read_text() or web.poll() is not None, "workflow web to listen")
        m = re.search(r"workflow web: (http\S+)", weblog.read_text())
        link = re.search(r"(http://\S+/login\?once=\S+)", weblog.read_text())
        assert m and link, weblog.read_text()
        url = m.group(1)
        owner = Client(url)
        assert owner.follow(link.group(1)) == 303
        status, runs = owner.get("/runs")
        assert status == 200 and f'href="/run?task={task}"' in runs, runs
        status, page = owner.get(f"/run?task={task}")
        assert status == 200, page
        # the calls and the move, from Claude Code's own JSONL transcript in the role's CLI state
        assert '<li class="step call">' in page and "mcp__workflow__whoami" not in page  # this run made no whoami call
        assert re.search(
            r'<li class="step call move"><span class="tag">move</span> <code class="call">'
            r"mcp__workflow__move_artifact\(artifact=specs/proposed/user-auth.md, state=todo",
            page,
        ), page
        assert re.search(r'<li class="step call mail">.*mcp__workflow__send_message\(event=approval', page), page
        assert "mcp__workflow__finish(status=done, summary=Approved user-auth.)" in page
        assert '<li class="step text">' in page and "Approved user-auth." in page
        assert '<li class="step result">' in page  # the tools' answers, as the CLI kept them
        tokens = re.search(r'<td class="tokens">(\d+) ', page)
        assert tokens and int(tokens.group(1)) > 0, page
        assert re.search(r'<td class="duration">\d+\.\d+s</td>', page), page
        assert re.search(r'<td class="cost">\$0\.\d{3}[1-9]|<td class="cost">\$0\.0*[1-9]', page), page
        assert f'href="/thread?id={request.replace("<", "%3C").replace(">", "%3E").replace("@", "%40")}"' in page, page

        carol = Client(url)
        assert carol.login("carol", "carol-password") == 303
        status, page = carol.get(f"/run?task={task}")
        assert status == 404 and "mcp__workflow__" not in page and "Approved user-auth." not in page, page
        assert carol.get("/run?task=99999")[0] == 404  # no such run: the same answer
    finally:
        web.terminate()
        web.wait(10)
