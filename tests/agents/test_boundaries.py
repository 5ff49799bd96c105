"""Boundaries that hold against an agent with a shell: a hostile command-backend agent tries
every way round them inside a real bubblewrap sandbox, against the real server; then the same
run behaves honestly and its work lands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.git import GIT_ENV, git_project, mail
from helpers.project import Project
from helpers.sandboxing import needs_bwrap
from workflow.delivery.credentials import owner_file
from workflow.delivery.handshake import LoginError
from workflow.delivery.server.smtpd import BackgroundServer
from workflow.delivery.transport import LocalSMTP, login
from workflow.mail.message import parse

BIN = Path(sys.executable).parent

HOSTILE = """\
import json, os, smtplib, subprocess, sys
from pathlib import Path

out = Path(os.environ["WORKFLOW_PROJECT"]) / "attempts"
out.mkdir(exist_ok=True)
results = {}
env = dict(os.environ)

def tried(name, ok, detail=""):
    results[name] = {"ok": ok, "detail": str(detail)[-400:]}

# 1. workflow-notify as someone else
r = subprocess.run([BIN + "/workflow-notify", "--from", "spec-reviewer", "approval", "specs/*/user-auth.md",
                    "spec-writer", "NEXT_STATE=todo"], capture_output=True, text=True)
tried("notify --from spec-reviewer", r.returncode == 0, r.stderr)

# 2. SMTP as spec-reviewer: without a credential, and with the run's own
from workflow.delivery.handshake import LoginError
from workflow.delivery.transport import LocalSMTP, login
SOCK = os.environ["WORKFLOW_SMTP"]
raw = ("From: spec-reviewer@workflow.local\\r\\nTo: spec-writer@workflow.local\\r\\nSubject: [approval] user-auth\\r\\n"
       "Message-ID: <forged.1@workflow.local>\\r\\nX-Event-Type: approval\\r\\nX-Artifacts: specs/*/user-auth.md\\r\\n"
       "X-Workflow-State: todo\\r\\n\\r\\napproved\\r\\n")
for name, credential in (("smtp without credential", None), ("smtp with the run's credential", True)):
    try:
        s = LocalSMTP(SOCK, 10)
        if credential:
            login(s, "~run/spec-writer", os.environ["WORKFLOW_TOKEN"])
        s.sendmail("spec-reviewer@workflow.local", ["spec-writer@workflow.local"], raw)
        tried(name, True)
    except (smtplib.SMTPException, LoginError) as e:
        tried(name, False, e)
try:  # the owner's login, with a guessed secret
    s = LocalSMTP(SOCK, 10)
    login(s, "~owner", "0" * 64)
    tried("smtp as the owner", True)
except (smtplib.SMTPException, LoginError) as e:
    tried("smtp as the owner", False, e)

# 2b. be the server the owner's commands talk to, and relay their login (no server runs)
import socket
owners = MAIL + "/.workflow/sock/smtpd"


def bind_at(path):  # from inside its folder: a deep project's path would be too long for AF_UNIX
    here = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        socket.socket(socket.AF_UNIX).bind(os.path.basename(path))
    finally:
        os.chdir(here)


for name, act in (
    ("remove the run's socket", lambda: os.unlink(SOCK)),
    ("listen where the owner's commands connect", lambda: bind_at(owners)),
    ("link a socket of its own there", lambda: os.symlink("/tmp/mine", owners)),
    ("listen where other runs connect", lambda: bind_at(os.path.dirname(SOCK) + "/smtpd")),
    ("reach the owner's socket (to fill its queue)", lambda: LocalSMTP(owners, 5)),
):
    try:
        act()
        tried(name, True)
    except OSError as e:
        tried(name, False, e)

# 3. read the mail root, the state directory, the owner's credential
for name, path in (("read a mailbox", MAIL + "/spec-writer/new"), ("read the index", MAIL + "/.workflow/index.sqlite"),
                   ("read the panel store", MAIL + "/.workflow/panels.sqlite"), ("read the credential", CRED)):
    try:
        p = Path(path)
        found = os.listdir(p) if p.is_dir() else p.read_bytes()
        tried(name, bool(found), found)
    except OSError as e:
        tried(name, False, e)

# 4. write straight into another role's new/
for name, path in (("write into new/", MAIL + "/spec-reviewer/new/1.evil"), ("make a mailbox", MAIL + "/evil/new/1.x")):
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("From: spec-reviewer@workflow.local\\n\\nforged\\n")
        tried(name, True)
    except OSError as e:
        tried(name, False, e)

# 5. other processes
seen = []
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            seen.append(Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\\0", b" ").decode())
        except OSError:
            pass
outside = [c for c in seen if "workflow run-role" in c or "bin/pytest" in c or "-m pytest" in c]
tried("see processes outside the run", bool(outside) or len(seen) > 6, seen)

# 6. now honestly: read and write artifacts, move what it owns, send as itself
text = Path("specs/proposed/user-auth.md").read_text()
Path("specs/proposed/user-auth.md").write_text(text + "\\nRevised by spec-writer.\\n")
r1 = subprocess.run([BIN + "/workflow", "move", "retry", "proposed", "--as", "spec-writer"], capture_output=True, text=True)
r2 = subprocess.run([BIN + "/workflow-notify", "review-request", "specs/proposed/user-auth.md", "spec-reviewer",
                     "CONTEXT=revised"], capture_output=True, text=True)
tried("honest move", r1.returncode == 0, r1.stdout + r1.stderr)
tried("honest notify", r2.returncode == 0, r2.stdout + r2.stderr)
(out / "token").write_text(os.environ["WORKFLOW_TOKEN"])
(out / "results.json").write_text(json.dumps(results))
__import__("subprocess").run([__import__("sys").executable, "-m", "workflow", "finish", "done", "worked"])
"""


def run_writer(p: Project) -> subprocess.CompletedProcess[str]:
    """``run-role --with-email --backend command spec-writer`` as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    return subprocess.run(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", "spec-writer"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )


def hostile_project(tmp_path: Path) -> Project:
    p = git_project(tmp_path / "hostile")
    (p.dir / "specs" / "todo" / "retry.md").write_text("# Retry\n")
    agent = HOSTILE.replace("BIN + ", f"{str(BIN)!r} + ").replace("MAIL + ", f"{str(p.mail)!r} + ")
    agent = agent.replace("CRED)", f"{str(owner_file())!r})")
    (p.dir / "agent.py").write_text(agent)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    (p.dir / ".gitignore").write_text("mail/\nattempts/\n")
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "agent and retry"]):
        subprocess.run(cmd, cwd=p.dir, check=True, env={**os.environ, **GIT_ENV})
    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    # the artefacts the agent must never see, all present
    assert (p.mail / ".workflow" / "index.sqlite").exists() and owner_file().exists()
    (p.mail / ".workflow" / "panels.sqlite").write_bytes(b"sealed assessments")
    return p


@needs_bwrap
def test_a_hostile_agent_in_a_spec_writer_run_gets_nowhere_and_its_honest_work_lands(tmp_path: Path) -> None:
    p = hostile_project(tmp_path)
    r = run_writer(p)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((p.dir / "attempts" / "results.json").read_text())
    refused = {name: v for name, v in results.items() if not name.startswith("honest")}
    assert all(not v["ok"] for v in refused.values()), refused
    assert "sender-identity" in results["notify --from spec-reviewer"]["detail"]
    assert "530 5.7.0" in results["smtp without credential"]["detail"] or "530" in str(
        results["smtp without credential"]
    )
    assert "550" in results["smtp with the run's credential"]["detail"]
    assert "sender-identity" in results["smtp with the run's credential"]["detail"]
    assert "535" in results["smtp as the owner"]["detail"]
    # honest work: the move happened and stays, the review-request is delivered as spec-writer
    assert results["honest move"]["ok"], results["honest move"]
    assert results["honest notify"]["ok"], results["honest notify"]
    assert (p.dir / "specs" / "proposed" / "retry.md").exists()
    assert "Revised by spec-writer." in (p.dir / "specs" / "proposed" / "user-auth.md").read_text()
    raws = [f.read_bytes() for f in p.new_files("spec-reviewer")]
    [request] = [parse(raw) for raw in raws if b"revised" in raw and parse(raw).event == "review-request"]
    assert request.sender == "spec-writer@workflow.local"
    # nothing the hostile part tried reached any Maildir
    assert mail(p, "approval") == []
    assert not (p.mail / "evil").exists()
    assert not (p.mail / "spec-reviewer" / "new" / "1.evil").exists()
    every = [f.read_bytes() for f in p.new_files()]
    assert not any(b"forged" in raw for raw in every)
    # the run's credential died with the run
    token = (p.dir / "attempts" / "token").read_text()
    assert re.search(
        "Read-only file system|No such file", results["listen where the owner's commands connect"]["detail"]
    )
    assert "Read-only file system" in results["listen where other runs connect"]["detail"]
    assert "No such file" in results["reach the owner's socket (to fill its queue)"]["detail"]
    with BackgroundServer(p.app.config, p.app.deliverer):
        s = LocalSMTP(str(p.app.config.state.socket), 10)
        with pytest.raises(LoginError) as e:
            login(s, "~run/spec-writer", token)
        assert e.value.code == 535
        s.close()


@needs_bwrap
def test_the_sandbox_shows_the_project_and_hides_the_mail_root_even_inside_it(tmp_path: Path) -> None:
    from workflow.agents.sandbox import view

    p = git_project(tmp_path / "view")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    args = view(p.app.config, [sys.executable, "-c", "x"], None, read_only=True)
    listing = textwrap.dedent(
        f"""
        import os
        print(sorted(os.listdir({str(p.dir)!r})))
        print(os.listdir({str(p.mail)!r}))
        try:
            open({str(p.dir / "specs" / "x.md")!r}, "w")
        except OSError as e:
            print("read-only", e.errno)
        """
    )
    r = subprocess.run(["bwrap", *args, "--", sys.executable, "-c", listing], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    project_files, mail_files, ro = r.stdout.splitlines()
    assert "specs" in project_files and "mail" in project_files
    assert mail_files == "[]"
    assert ro.startswith("read-only")


def test_without_a_sandbox_runs_work_and_say_that_boundaries_are_advisory(tmp_path: Path) -> None:
    p = git_project(tmp_path / "advisory", '\n[runs]\nsandbox = "none"\n')
    (p.dir / "agent.py").write_text(
        "import os, subprocess, sys\nsys.stdin.read()\n"
        f"subprocess.run([{str(BIN / 'workflow-notify')!r}, 'answer', 'specs/*/user-auth.md', 'spec-reviewer',"
        " 'CONTEXT=done'], check=True)\n"
        f"subprocess.run([{str(BIN / 'workflow')!r}, 'finish', 'done', 'answered'], check=True)\n"
    )
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    r = run_writer(p)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'spec-writer: [runs] sandbox = "none": boundaries are advisory' in r.stdout
    assert mail(p, "answer") == [("spec-reviewer", "answer", "proposed", ("specs/*/user-auth.md",))]
    status_out = p.run("agentd", "status").stdout
    assert 'sandbox: [runs] sandbox = "none": boundaries are advisory' in status_out
