"""Issue 49: the cockpit's charts of flow and cost and its /metrics — a known burst of mail and
runs in a real project (real git, real task store), a real `workflow web`; the numbers read back
with prometheus_client's own parser and from /charts.json, and the charts drawn in Chromium."""

from __future__ import annotations

import json
import re
import smtplib
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from helpers.browser import chrome, log_in, wait_for
from helpers.git import sh
from helpers.project import TESTER, TESTER_PASSWORD, Project
from helpers.smtp import server_process
from helpers.web import BOB, BOB_PASSWORD, Client, Server
from workflow.agentd.tasks import Tasks, TaskStatus

DAY = time.strftime("%Y-%m-%d", time.gmtime())


def _runs(p: Project, role: str, ok: int, failed: int) -> list[int]:
    """``ok`` runs of ``role`` that completed and ``failed`` that failed for good, one at a time."""
    ids = []
    with Tasks(p.app.config.state.tasks) as tasks:
        for i in range(ok + failed):
            t, _ = tasks.enqueue(role, [f"<{role}-{i}-{time.time_ns()}@workflow.local>"])
            claimed = tasks.claim(10)
            assert claimed is not None and claimed.id == t.id
            if i < ok:
                tasks.finish(t.id, TaskStatus.COMPLETED, "")
            else:
                tasks.finish(t.id, TaskStatus.FAILED, "boom", dead=True)
            ids.append(t.id)
    return ids


def _burst(p: Project) -> None:
    for _ in range(3):
        p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    for _ in range(2):
        p.send("spec-writer", "question", "specs/proposed/billing.md", "implementer", QUESTION="why")
    _runs(p, "implementer", ok=2, failed=1)
    _runs(p, "spec-writer", ok=1, failed=0)
    with Tasks(p.app.config.state.tasks) as tasks:
        tasks.add_usage("implementer", 1500)
        tasks.add_cost("implementer", 250_000)
        tasks.add_usage("spec-writer", 700)
        tasks.enqueue("spec-writer", ["<waits@workflow.local>"])  # one waits in the queue


def _refusals(p: Project) -> None:
    """Through a real `workflow smtpd`: two RCPTs to no role, one to a panel's internal address
    from outside it; each refused by its rule."""
    with server_process(p.dir) as (_proc, port):
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.login(TESTER, TESTER_PASSWORD)
            for rcpt in (
                "nobody@workflow.local",
                "nobody-else@workflow.local",
                "spec-reviewer-panel-internal@workflow.local",
            ):
                s.mail("spec-writer@workflow.local")
                code, _ = s.rcpt(rcpt)
                assert code >= 500, (rcpt, code)
                s.rset()


def test_metrics_parse_and_count_a_known_burst_of_mail_and_runs(project: Project, server: Server) -> None:
    _burst(project)
    _refusals(project)
    anon = Client(server.url)
    assert anon.get("/metrics")[0] == 401
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, text = bob.get("/metrics")
    assert status == 200, text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("workflow_messages_delivered_total", event="review-request", mailbox="spec-reviewer") == 3
    assert value("workflow_messages_delivered_total", event="question", mailbox="implementer") == 2
    assert value("workflow_runs_total", role="implementer", result="ok") == 2
    assert value("workflow_runs_total", role="implementer", result="failed") == 1
    assert value("workflow_runs_total", role="spec-writer", result="ok") == 1
    assert value("workflow_run_duration_seconds_count", role="implementer") == 3
    assert value("workflow_run_duration_seconds_bucket", role="implementer", le="+Inf") == 3
    assert value("workflow_queue_depth", role="spec-writer") == 1
    assert value("workflow_tokens_total", role="implementer") == 1500
    assert value("workflow_tokens_total", role="spec-writer") == 700
    assert value("workflow_cost_usd_total", role="implementer") == 0.25
    refused = {k[1]: v for k, v in samples.items() if k[0] == "workflow_messages_refused_total"}
    # the SMTP server's refusals, counted by command, code and rule (no role: no named rule)
    assert refused == {
        (("code", "550"), ("command", "RCPT"), ("rule", "-")): 2,
        (("code", "550"), ("command", "RCPT"), ("rule", "internal-members-only")): 1,
    }, refused
    # every metric the example Grafana dashboard graphs is one /metrics serves
    board = json.loads((Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "workflow-mail.json").read_text())
    graphed = {
        m for panel in board["panels"] for t in panel.get("targets", []) for m in re.findall(r"workflow_\w+", t["expr"])
    }
    served = {name for name, _ in samples} | {f.name for f in text_string_to_metric_families(text)}
    assert graphed and graphed <= served, graphed - served
    # the cockpit's own latency: the requests above were counted by route
    assert value("workflow_web_request_duration_seconds_count", route="/login") >= 1
    assert value("workflow_web_request_duration_seconds_count", route="/metrics") >= 1


def test_metrics_answer_a_scraper_with_the_token_and_refuse_a_wrong_one(project: Project, tmp_path: Path) -> None:
    from helpers.web import web_server

    toml = project.dir / "workflow.toml"
    text = toml.read_text()
    assert "[web]" not in text
    toml.write_text(text + '\n[web]\nmetrics_token = "scrape-me-please"\n')
    _runs(project, "implementer", ok=1, failed=0)
    with web_server(project) as s:
        c = Client(s.url)
        c.opener.addheaders = [("Authorization", "Bearer wrong")]
        assert c.get("/metrics")[0] == 401
        c.opener.addheaders = [("Authorization", "Bearer scrape-me-please")]
        status, body = c.get("/metrics")
    assert status == 200, body
    names = {f.name for f in text_string_to_metric_families(body)}
    assert {"workflow_runs", "workflow_queue_depth", "workflow_run_duration_seconds"} <= names, names


def test_charts_json_agrees_with_the_ledger_and_git_and_the_charts_render_in_chromium(
    project: Project, server: Server
) -> None:
    _burst(project)
    sh(project, "git", "mv", "specs/proposed/billing.md", "specs/todo/billing.md")
    sh(project, "git", "commit", "-q", "-m", "billing to todo")
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, text = bob.get("/charts.json")
    assert status == 200, text
    data = json.loads(text)
    with Tasks(project.app.config.state.tasks) as tasks:
        ended = [t for t in tasks.list() if t.status in (TaskStatus.COMPLETED, TaskStatus.FAILED)]
        usage = tasks.usage_today()
        cost = tasks.cost_today()
    runs = {(r["role"], r["day"]): (r["runs"], r["failed"]) for r in data["runs"]}
    for role in ("implementer", "spec-writer"):
        mine = [t for t in ended if t.role == role]
        assert runs[(role, DAY)] == (len(mine), sum(t.status == TaskStatus.FAILED for t in mine)), data["runs"]
    by_role = {r["role"]: r for r in data["usage"] if r["day"] == DAY}
    assert by_role["implementer"]["tokens"] == usage["implementer"] == 1500
    assert by_role["implementer"]["cost_usd"] == cost["implementer"] == 0.25
    assert by_role["implementer"]["budget_tokens"] == project.app.config.agentd.daily_tokens
    assert data["queue_now"] == [{"role": "spec-writer", "depth": 1}]
    flow = {(r["day"], r["state"]): (r["entered"], r["left"]) for r in data["flow"]}
    assert flow[(DAY, "todo")][0] >= 1 and flow[(DAY, "proposed")][1] >= 1, data["flow"]

    with chrome() as driver:
        from selenium.webdriver.common.by import By

        log_in(driver, server.url, BOB, BOB_PASSWORD)
        driver.get(server.url + "charts")
        images = driver.find_elements(By.CSS_SELECTOR, "img.chart")
        assert len(images) == 5
        wait_for(
            driver,
            lambda d: all(
                d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i) for i in images
            ),
            "every chart drawn",
        )
        for i in images:
            box = i.rect
            assert box["width"] > 100 and box["height"] > 50, box
        table = driver.find_element(By.CSS_SELECTOR, 'table[data-chart="runs"]')
        cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in table.find_elements(By.TAG_NAME, "tr")]
        assert [DAY, "implementer", "3", "1"] in cells, cells
        csp = [e for e in driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]
        assert not csp, csp  # nothing the page or a chart holds was refused
