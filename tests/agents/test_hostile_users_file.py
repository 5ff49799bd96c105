"""The people's logins file is policy the owner's server obeys — who may send as whom — and a
`[smtp] auth_users_file` in the project (docs/mail-server.md: "relative to the project") was not part of the
control plane the sandbox binds read-only: an agent added a login of its own, the server read the
file again by itself, and the agent sent over TCP as any role it named — a human's included —
delivered at once, whatever its run did next. Now every file the config names inside the project
(``core.control``) is the control plane: read-only (a secret hidden), its folders not moved away,
its commits failing the run, and no run starts while one is missing or behind a symlink."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.git import sh
from helpers.hostile import agent_project
from helpers.project import Project
from helpers.runs import run_command_role, unread
from helpers.sandboxing import needs_bwrap
from helpers.smtp import server_process
from workflow.artifacts import decisions
from workflow.delivery.credentials import hash_password
from workflow.mail.message import parse

AGENT = """\
import smtplib, sys, time
from pathlib import Path
from workflow.delivery.credentials import hash_password
sys.stdin.read()
port, request = int(Path("port").read_text()), Path("request").read_text().strip()
with open("people", "a") as f:  # the project's logins file: writable in the sandbox
    f.write(f"mallory:{hash_password('pw', 'salt', 1)}:user,spec-reviewer\\n")
raw = (
    "From: user@workflow.local\\r\\nTo: spec-writer@workflow.local\\r\\nSubject: Re: review\\r\\n"
    f"Message-ID: <forged.1.user@workflow.local>\\r\\nIn-Reply-To: {request}\\r\\nReferences: {request}\\r\\n"
    "\\r\\nApprove. Looks fine to me.\\r\\n"
).encode()
for _ in range(40):  # until the server has read the file again (it watches it)
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
            s.login("mallory", "pw")
            s.sendmail("user@workflow.local", ["spec-writer@workflow.local"], raw)
        print("SENT AS user")
        break
    except smtplib.SMTPException as e:
        print("not yet", e)
        time.sleep(0.25)
finish("failed", "nothing to see here")
"""


@needs_bwrap
def test_an_agent_cannot_add_a_login_to_a_users_file_in_the_project(tmp_path: Path) -> None:
    people = f"alice:{hash_password('alice-pw', 'salt', 1)}:user\n"
    p = agent_project(tmp_path / "uf", AGENT, smtp='auth_users_file = "people"\n')
    (p.dir / "people").write_text(people)
    # a person's role was asked to review the spec: what a decision by mail answers
    request = p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "user")
    (p.dir / "request").write_text(request)
    with server_process(p.dir) as (proc, port):
        (p.dir / "port").write_text(str(port))
        r = run_command_role(p, "spec-reviewer", timeout=60)
        proc.terminate()
    assert r.returncode == 1, r.stdout + r.stderr  # the run failed: nothing it did should count
    assert unread(p, "spec-reviewer") == 1
    forged = [f for f in p.new_files("spec-writer") if b"<forged.1.user@workflow.local>" in f.read_bytes()]
    try:
        assert (p.dir / "people").read_text() == people, "the agent's login stayed in the owner's logins file"
        assert forged == [], "mail From: user@ sent by a failed run's agent was delivered"
    finally:
        if forged:  # and it is a person's decision, as agentd reads one
            with p.app.index() as index:
                index.refresh(["spec-writer"])
                row = next(r for r in index.query(message_ids=["<forged.1.user@workflow.local>"]))
                d = decisions.read(p.app, index, row)
            print("decision:", d, parse(forged[0].read_bytes()).event, file=sys.stderr)
            assert d is not None and d.role == "user" and d.event == "approval"


# The class: every file the config names inside the project — the users file, [smtp]/[web] TLS
# certificate and key, a bridge's password file, the agent's own program — is the owner's.
NAMED = (
    'auth_users_file = "conf/people"\ntls_cert = "conf/cert.pem"\ntls_key = "conf/key.pem"\n',
    '\n[bridges.gmail]\nimap_host = "127.0.0.1"\nuser = "me"\npassword_file = "conf/gmail-password"\n',
)
PEOPLE = f"alice:{hash_password('alice-pw', 'salt', 1)}:user\n"

TAMPER = """\
import json, os, subprocess, sys
from pathlib import Path
sys.stdin.read()
mode = Path(sys.argv[1]).read_text()
Path("ran").write_text("the agent ran")
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "done"
    except OSError as e:
        results[name] = f"refused: {e.strerror}"
if mode == "write":
    attempt("append a login", lambda: open("conf/people", "a").write("mallory:x:user\\n"))
    def replace():
        Path("conf/new").write_text("mallory:x:user\\n")
        os.replace("conf/new", "conf/people")
    attempt("rename a file over it", replace)
    def move_away():
        os.rename("conf", "conf-old")
        Path("conf").mkdir()
        Path("conf/people").write_text("mallory:x:user\\n")
    attempt("move its folder away", move_away)
    attempt("write the certificate", lambda: open("conf/cert.pem", "w").write("mine"))
    attempt("rewrite the program other runs start", lambda: open("agent.py", "a").write("# mine\\n"))
    results["tls key"] = Path("conf/key.pem").read_text()
    results["gmail password"] = Path("conf/gmail-password").read_text()
    print("RESULTS " + json.dumps(results))
elif mode == "forge":  # history forged with git's plumbing: the sandbox cannot stop a commit
    def git(*args, data=None):
        return subprocess.run(["git", *args], input=data, capture_output=True, text=True, check=True).stdout.strip()
    blob = git("hash-object", "-w", "--stdin", data="mallory:x:user\\n")
    git("update-index", "--cacheinfo", f"100644,{blob},conf/people")
    git("commit", "-qm", "harmless", "--no-verify")
finish("done", "tried")
"""


def tamper_project(tmp_path: Path, smtp: str = NAMED[0], extra: str = NAMED[1]) -> Project:
    p = agent_project(tmp_path / "named", TAMPER, str(tmp_path / "mode"), smtp=smtp, extra=extra)
    (p.dir / "conf").mkdir()
    for name, text in (
        ("people", PEOPLE),
        ("cert.pem", "CERT"),
        ("key.pem", "KEY-SECRET"),
        ("gmail-password", "GMAIL-SECRET"),
    ):
        (p.dir / "conf" / name).write_text(text)
    sh(p, "git", "add", "conf/people", "conf/cert.pem")  # the secrets stay untracked, as they should
    sh(p, "git", "commit", "-qm", "the people's logins")
    return p


def tampered(p: Project, mode: str) -> subprocess.CompletedProcess[str]:
    (p.dir.parent / "mode").write_text(mode)
    return run_command_role(p, "spec-reviewer", timeout=60)


@needs_bwrap
def test_no_file_the_config_names_in_the_project_is_written_moved_away_or_read_by_an_agent(tmp_path: Path) -> None:
    p = tamper_project(tmp_path)
    program = (p.dir / "agent.py").read_text()
    r = tampered(p, "write")
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads(r.stdout[r.stdout.index("RESULTS ") + 8 :].splitlines()[0])
    assert {k: v for k, v in results.items() if v == "done"} == {}, results
    assert results["tls key"] == "" and results["gmail password"] == "", results  # secrets: hidden, not only kept
    assert (p.dir / "conf" / "people").read_text() == PEOPLE and not (p.dir / "conf-old").exists()
    assert (p.dir / "conf" / "cert.pem").read_text() == "CERT" and (p.dir / "agent.py").read_text() == program
    assert (p.dir / "conf" / "key.pem").read_text() == "KEY-SECRET"


@needs_bwrap
def test_a_run_that_commits_a_file_the_config_names_fails_and_the_file_is_put_back(tmp_path: Path) -> None:
    p = tamper_project(tmp_path)
    r = tampered(p, "forge")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "changed conf/people: the control files are the owner's" in r.stdout, r.stdout
    assert sh(p, "git", "show", "HEAD:conf/people").stdout == PEOPLE
    assert (p.dir / "conf" / "people").read_text() == PEOPLE


@needs_bwrap
@pytest.mark.parametrize("how", ["missing", "behind a link"])
def test_no_run_starts_while_a_file_the_config_names_is_missing_or_reached_through_a_link(
    tmp_path: Path, how: str
) -> None:
    p = tamper_project(tmp_path)
    if how == "missing":  # the agent could make it, and the bridge would read its password there
        (p.dir / "conf" / "gmail-password").unlink()
        key, path, why = "[bridges.gmail] password_file", p.dir / "conf" / "gmail-password", "does not exist"
    else:  # the link's folder is the agent's to write: it could point the link elsewhere
        (tmp_path / "elsewhere").mkdir()
        (p.dir / "conf" / "people").rename(tmp_path / "elsewhere" / "people")
        (p.dir / "conf" / "people").symlink_to(tmp_path / "elsewhere" / "people")
        key, path, why = "[smtp] auth_users_file", p.dir / "conf" / "people", "reached through the symlink"
    r = tampered(p, "write")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refusing to start {sys.executable}: {key} names {path}" in r.stdout and why in r.stdout, r.stdout
    assert not (p.dir / "ran").exists(), "the agent ran"
    assert unread(p, "spec-reviewer") == 1
