"""A full disk is one line naming the file system and what waits — never a traceback — in run-role,
the server and agentd; and nothing is lost: once there is room, the run left open is recovered and
the mail that waited is handled. An agent fills a small file system (a tmpfs of a few MiB in a
mount namespace of the test's own) that holds the project and the mail root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.sandboxing import needs_bwrap

HERE = Path(__file__).resolve().parents[1]

FILLER = """\
import os, subprocess, sys
from pathlib import Path
sys.stdin.read()
if Path("mode").read_text().strip() == "fill":  # an agent edits, fills the disk, then says it is done
    import base64
    Path("specs/proposed/user-auth.md").write_bytes(base64.b64encode(os.urandom(300_000)))  # git cannot squeeze it
    for i, size in enumerate((1 << 16, 4096, 512, 1)):  # outside the artifact roots: no rollback removes it
        with open(f"fill-{i}.bin", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(os.urandom(size))
            except OSError:
                pass
subprocess.run([sys.executable, "-I", "-m", "workflow", "finish", "done", "worked"], check=False)
"""

SCENARIO = """\
import json, os, smtplib, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from helpers.git import GIT_ENV, git_project, sh
from helpers.runs import run_command_role, unread

small, out = Path(sys.argv[2]), Path(sys.argv[3])
p = git_project(small / "p", "\\n[agentd]\\nretry_backoff = 0.2\\nroles = [\\"spec-reviewer\\"]\\n")
(p.dir / "agent.py").write_text(sys.argv[4])
toml = p.dir / "workflow.toml"
toml.write_text(toml.read_text().replace('backend = "scripted"', 'backend = "command"'))  # agentd's runs too
with open(toml, "a") as f:
    f.write(f'\\n[backends.command]\\nargv = ["{sys.executable}", "agent.py"]\\ntimeout = 60\\n')
(p.dir / ".gitignore").write_text("mail/\\nmode\\nfill-*\\n")
sh(p, "git", "add", "-A")
sh(p, "git", "commit", "-qm", "agent")
p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}

def start(*args):
    return subprocess.Popen([sys.executable, "-m", "workflow", *args], cwd=p.dir, env={**env, **GIT_ENV},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

server = start("smtpd")
deadline = time.monotonic() + 30
while True:
    try:
        smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=10).quit()
        break
    except OSError:
        assert time.monotonic() < deadline and server.poll() is None, server.communicate()[0]
        time.sleep(0.05)
said = {}
(p.dir / "mode").write_text("fill")
r = run_command_role(p, "spec-reviewer")
said["run-role"] = [r.returncode, r.stdout + r.stderr]
said["unread-while-full"] = unread(p, "spec-reviewer")

s = smtplib.SMTP("127.0.0.1", p.app.config.smtp.port, timeout=10)
s.login("tester", "tester-password")
raw = ("From: spec-writer@workflow.local\\r\\nTo: spec-reviewer@workflow.local\\r\\nSubject: big\\r\\n"
       "Message-ID: <full.1@workflow.local>\\r\\nX-Event-Type: status-update\\r\\n"
       "X-Artifacts: specs/proposed/user-auth.md\\r\\nX-Workflow-State: proposed\\r\\n\\r\\n" + "x" * 9000 + "\\r\\n")
try:
    s.sendmail("spec-writer@workflow.local", ["spec-reviewer@workflow.local"], raw)
    said["smtp"] = "250"
except smtplib.SMTPResponseException as e:
    said["smtp"] = f"{e.smtp_code} {e.smtp_error.decode()}"
s.quit()

daemon = start("agentd", "run", "--rescan", "0.2")
try:
    said["agentd-full"] = daemon.communicate(timeout=3)[0]  # it says why it cannot start, and stops
except subprocess.TimeoutExpired:
    daemon.terminate()  # or it waits for room
    said["agentd-full"] = daemon.communicate(timeout=60)[0]
[os.unlink(f) for f in p.dir.glob("fill-*.bin")]  # room again: what waited goes on
(p.dir / "mode").write_text("work")
daemon = start("agentd", "run", "--rescan", "0.2")
deadline = time.monotonic() + 60
while unread(p, "spec-reviewer") and time.monotonic() < deadline and daemon.poll() is None:
    time.sleep(0.1)
said["unread-after"] = unread(p, "spec-reviewer")
for proc, name in ((daemon, "agentd"), (server, "smtpd")):
    proc.terminate()
    said[name] = proc.communicate(timeout=60)[0]
said["status"] = sh(p, "git", "status", "--porcelain", "--", "specs").stdout
out.write_text(json.dumps(said))
"""


@needs_bwrap
@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1) to mount a tmpfs"
)
def test_a_full_disk_is_one_line_and_what_waited_goes_on_once_there_is_room(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    (tmp_path / "scenario.py").write_text(SCENARIO)
    out = tmp_path / "said.json"
    mount = 'mount -t tmpfs -o size=6m,mode=0700 tmpfs "$1" && shift && exec "$@"'
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh", str(small)]
        + [sys.executable, str(tmp_path / "scenario.py"), str(HERE), str(small), str(out), FILLER],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0 and out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    said = json.loads(out.read_text())
    code, text = said["run-role"]
    assert code != 0 and "Traceback" not in text, text[-3000:]
    assert f"no space left on the file system at {small}" in text, text[-3000:]
    assert said["unread-while-full"] == 1  # its mail waits
    assert said["smtp"].startswith("452 4.3.1"), said["smtp"]
    assert "Traceback" not in said["smtpd"] and f"no space left on the file system at {small}" in said["smtpd"]
    full = said["agentd-full"]
    assert "Traceback" not in full and f"no space left on the file system at {small}" in full, full
    assert said["unread-after"] == 0, said["agentd"][-3000:]  # once there was room, the run was recovered and done
    assert "Traceback" not in said["agentd"], said["agentd"][-3000:]
