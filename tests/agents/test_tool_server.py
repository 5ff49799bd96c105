"""The run's tool server against a hostile agent: what the agent does to its own run directory,
its CLI state or its tool socket never makes run-role write where it should not, keep a move of a
failed run, hang, or count a run done that said it failed — with real run-roles, a real bubblewrap
sandbox and the agent talking to its tool socket as any agent CLI's MCP server does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from helpers.git import GIT_ENV, git_project, sh
from helpers.project import Project
from helpers.runs import script, unread
from helpers.sandboxing import needs_bwrap

AGENT = """\
import os, sys
from pathlib import Path
from workflow.agents.toolwire import call as ask  # what `workflow mcp` relays through
sys.stdin.read()
mode, victim = Path("mode").read_text().strip(), sys.argv[1]
run = Path(os.environ["WORKFLOW_RUN"])

def call(tool, **arguments):
    answer = ask(os.environ["WORKFLOW_TOOLS"], tool, arguments)
    print(tool, answer)
    return answer

if mode == "symlink":  # the shell journal points at the owner's file
    os.symlink(victim, run / "moves.jsonl")
elif mode == "fifo":  # … or is a FIFO nobody writes
    os.mkfifo(run / "moves.jsonl")
moved = call("move_artifact", artifact="specs/proposed/user-auth.md", state="todo")
assert moved["ok"], moved
if mode == "delete":  # the journal of what it did, gone
    for journal in run.glob("*.jsonl"):
        journal.unlink()
if mode == "twice":  # said it failed, then that it was done after all
    call("finish", status="failed", summary="cannot judge it")
    print("second", call("finish", status="done", summary="all done"))
    sys.exit(0)
call("finish", status="failed", summary="gave up")
"""


def project(tmp_path: Path) -> tuple[Project, Path]:
    p = git_project(tmp_path / "ts")
    victim = tmp_path / "owner-bashrc"
    victim.write_text("# the owner's\n")
    (p.dir / "agent.py").write_text(AGENT)
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py", "{victim}"]\ntimeout = 30\n')
    (p.dir / ".gitignore").write_text("mail/\nmode\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    return p, victim


def run(p: Project, mode: str) -> subprocess.CompletedProcess[str]:
    (p.dir / "mode").write_text(mode)
    return run_role(p, "command")


def run_role(p: Project, backend: str) -> subprocess.CompletedProcess[str]:
    """`run-role --with-email --backend BACKEND spec-reviewer`, as the owner runs it (with the CLIs'
    keys set, as run-role refuses a run no credential reaches)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    env.update(ANTHROPIC_API_KEY="sk-stand-in", OPENAI_API_KEY="sk-stand-in", GEMINI_API_KEY="stand-in")
    return subprocess.run(
        [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", backend, "spec-reviewer"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=90,
    )


@needs_bwrap
def test_a_failed_runs_tool_moves_are_reverted_whatever_the_agent_does_to_its_run_directory(tmp_path: Path) -> None:
    """Found by a hostile helper: the tools' moves were journalled in the agent's own directory —
    a symlink there made run-role append to the owner's ~/.bashrc, a deleted journal kept the move
    of a failed run, a FIFO hung run-role (and the project's git lock) for minutes."""
    p, victim = project(tmp_path)
    for mode in ("symlink", "delete", "fifo"):
        t0 = time.monotonic()
        r = run(p, mode)
        assert r.returncode == 1 and "finished its run as failed: gave up" in r.stdout, (mode, r.stdout + r.stderr)
        assert time.monotonic() - t0 < 30, mode
        assert victim.read_text() == "# the owner's\n", mode
        assert (p.dir / "specs" / "proposed" / "user-auth.md").exists(), (mode, r.stdout)
        assert not (p.dir / "specs" / "todo" / "user-auth.md").exists(), mode
        assert unread(p, "spec-reviewer") == 1
    r = run(p, "twice")
    assert r.returncode == 1 and "finished its run as failed: cannot judge it" in r.stdout, r.stdout + r.stderr
    assert (p.dir / "specs" / "proposed" / "user-auth.md").exists() and unread(p, "spec-reviewer") == 1


@needs_bwrap
def test_what_an_agent_leaves_in_its_cli_state_never_carries_a_profiles_settings_elsewhere(tmp_path: Path) -> None:
    """Found by a hostile helper: the Gemini profile wrote its settings file through a symlink
    the last run's agent left in the role's CLI state (the owner's ~/.bashrc, overwritten)."""
    p = git_project(tmp_path / "gs")
    victim = tmp_path / "owner-dir"
    victim.mkdir()
    state = p.app.config.state.cli("spec-reviewer") / "gemini"
    state.mkdir(parents=True)
    os.symlink(victim, state / ".gemini")  # what a hostile agent of the role left behind
    with open(p.dir / "workflow.toml", "a") as f:
        f.write('\n[backends.gemini]\nprogram = "/bin/true"\n')
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    r = run_role(p, "gemini")
    assert r.returncode == 1, r.stdout + r.stderr  # /bin/true never finishes a run
    assert list(victim.iterdir()) == []
    assert (state / ".gemini" / "settings.json").is_file() and not (state / ".gemini").is_symlink()


def test_scripts_run_role_sh_never_imports_a_workflow_package_planted_in_the_project(tmp_path: Path) -> None:
    """Found by a hostile helper: `python -c` put the working directory (a project, where an
    agent may leave `workflow/`) first on the module path."""
    p = git_project(tmp_path / "rs")
    canary = tmp_path / "canary"
    (p.dir / "workflow").mkdir()
    (p.dir / "workflow" / "__init__.py").write_text(f"open({str(canary)!r}, 'w')\n")
    script = Path(__file__).resolve().parents[2] / "scripts" / "run-role.sh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    r = subprocess.run(
        ["bash", str(script), "--dry-run", "--with-email", "spec-reviewer"],
        cwd=p.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert not canary.exists()


@needs_bwrap
def test_an_agent_printing_a_flood_costs_run_role_no_memory(tmp_path: Path) -> None:
    """Found by a hostile helper: run-role held all an agent printed (1 GiB printed: 3 GB of
    run-role). What it prints goes to a file and is read back capped (its head and its tail)."""
    p = git_project(tmp_path / "fl")
    (p.dir / "agent.py").write_text(
        "import subprocess, sys\nsys.stdin.read()\nline = b'x' * 1023 + b'\\n'\n"
        "for _ in range(150 * 1024):\n    sys.stdout.buffer.write(line)\n"
        "print('THE-END')\nsys.stdout.flush()\n"
        "subprocess.run([sys.executable, '-I', '-m', 'workflow', 'finish', 'done', 'flooded'], check=True)\n"
    )
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f'\n[backends.command]\nargv = ["{sys.executable}", "agent.py"]\ntimeout = 60\n')
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    argv = [sys.executable, "-m", "workflow", "run-role", "--with-email", "--backend", "command", "spec-reviewer"]
    r = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS=%M", *argv], cwd=p.dir, env={**env, **GIT_ENV}, capture_output=True, text=True
    )
    assert r.returncode == 0 and "THE-END" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    rss = int(r.stderr.rsplit("MAXRSS=", 1)[1].split()[0])  # KiB, of run-role and what it waited for
    assert rss < 150_000, f"run-role grew to {rss} KiB for 150 MiB printed"


SHELL = """\
import os, subprocess, sys
from pathlib import Path
sys.stdin.read()
mode = Path("mode").read_text().strip()
if mode == "commit":  # its own commit, behind the tools' back
    with open("specs/proposed/user-auth.md", "a") as f:
        f.write("INJECTED BY A FAILED RUN\\n")
    subprocess.run(["git", "commit", "-qam", "edit"], check=True)
elif mode == "rename":  # a move by hand, without git
    os.rename("specs/proposed/user-auth.md", "specs/done/user-auth.md")
subprocess.run([sys.executable, "-I", "-m", "workflow", "finish", "failed", "gave up"], check=True)
"""


@needs_bwrap
def test_a_failed_shell_run_keeps_no_commit_of_its_own_and_loses_no_artifact_it_renamed(tmp_path: Path) -> None:
    """Found by a hostile helper: a failed run's own `git commit` stayed; an artifact it renamed
    by hand to another state folder was removed there and not put back — in no folder at all."""
    p, _ = project(tmp_path)
    (p.dir / "agent.py").write_text(SHELL)
    sh(p, "git", "commit", "-qam", "a shell agent")
    for mode in ("commit", "rename"):
        r = run(p, mode)
        assert r.returncode == 1 and "finished its run as failed: gave up" in r.stdout, (mode, r.stdout + r.stderr)
        assert (p.dir / "specs" / "proposed" / "user-auth.md").read_text() == "# User auth\n", (mode, r.stdout)
        assert not (p.dir / "specs" / "done" / "user-auth.md").exists(), mode
        assert sh(p, "git", "status", "--porcelain", "--", "specs").stdout == "", mode
        assert unread(p, "spec-reviewer") == 1


def test_agentds_fork_server_never_imports_a_package_planted_in_the_project(tmp_path: Path) -> None:
    """Found by a hostile helper: Python's fork server imports its preload with its working
    directory first on the module path; started where agentd runs (the project, as the systemd
    unit and `workflow up` do), it imported a `workflow/` an agent left there, and every run after
    was forked from it."""
    p = git_project(tmp_path / "fs")
    canary = tmp_path / "canary"
    for name in ("workflow", "click"):
        (p.dir / name).mkdir()
        (p.dir / name / "__init__.py").write_text(f"open({str(canary) + '-' + name!r}, 'w')\n")
    script(p, "spec-reviewer", [{"say": "reviewed"}])
    p.send("spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "workflow"), "agentd", "run", "--rescan", "0.2"],
        cwd=p.dir,
        env={**env, **GIT_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while unread(p, "spec-reviewer") and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    assert unread(p, "spec-reviewer") == 0  # a run was forked and did its work
    assert not list(tmp_path.glob("canary*"))
