"""An agent's embedded repository never makes the owner's git run its programs: a hostile shell
agent in a real bubblewrap sandbox makes repositories inside the project (a plain one and one
whose git directory sits in ``.git/modules``), gives them every config key git can run a program
from, stages or commits them as gitlinks, and tries the same keys on the project's own git
config. After the run, every owner-side git command that follows — run-role's commit or rollback,
``workflow move`` with its hooks, ``workflow status`` — runs none of them: no canary exists."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.git import git_project, sh
from helpers.project import Project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

FILTER_AGENT = """\
import os, subprocess, sys
from pathlib import Path
sys.stdin.read()
canary = sys.argv[1]
def git(*a, cwd="."):
    return subprocess.run(["git", *a], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()
sub = "specs/todo/sub"
git("init", "-q", sub)
Path(sub, "t.txt").write_text("t\\n")
git("add", "t.txt", cwd=sub)
git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "t", cwd=sub)
git("config", "filter.x.clean", f"id > {canary}/filter; cat", cwd=sub)
Path(sub, ".git/info/attributes").write_text("* filter=x\\n")
os.utime(Path(sub, "t.txt"), (1, 1))  # touched: the owner's git would hash it again, through the filter
git("update-index", "--add", "--cacheinfo", f"160000,{git('rev-parse', 'HEAD', cwd=sub)},{sub}")
subprocess.run([sys.executable, "-I", "-m", "workflow", "finish", "done", "worked"])
"""


def agent_project(tmp_path: Path, agent: str, *args: str) -> tuple[Project, Path]:
    p = git_project(tmp_path / "emb")
    canary = tmp_path / "canary"  # outside the project: the sandbox has no such folder; only the owner writes there
    canary.mkdir()
    (p.dir / "agent.py").write_text(agent)
    argv = ", ".join(f'"{a}"' for a in (sys.executable, "agent.py", str(canary), *args))
    with open(p.dir / "workflow.toml", "a") as f:
        f.write(f"\n[backends.command]\nargv = [{argv}]\ntimeout = 60\n")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "agent")
    p.send("spec-reviewer", "rejection", "specs/proposed/user-auth.md", "spec-writer", REASON="vague")
    return p, canary


@needs_bwrap
def test_an_embedded_repositorys_filter_never_runs_as_the_owner(tmp_path: Path) -> None:
    """Issue 47, reproduction 2: run-role's `git status -- specs` entered the staged embedded
    repository before anything judged the gitlink, and ran its clean filter as the owner."""
    p, canary = agent_project(tmp_path, FILTER_AGENT)
    r = run_command_role(p)
    assert r.returncode == 1 and "specs/todo/sub" in r.stdout, r.stdout + r.stderr
    assert list(canary.iterdir()) == [], r.stdout
    assert p.run("move", "user-auth", "todo", "--as", "spec-reviewer").returncode == 0
    assert p.run("status").returncode == 0
    assert list(canary.iterdir()) == []


# Every config key git can run a program from (git-config(1), gitattributes(5), githooks(5)):
# its value makes the program touch a canary of its name. Some run only under commands the owner's
# side never runs (a pager, an editor, a credential helper): they are planted all the same.
PROGRAM_KEYS = (
    "filter.x.clean",
    "filter.x.smudge",
    "filter.x.process",
    "diff.x.textconv",
    "diff.x.command",
    "diff.external",
    "merge.x.driver",
    "core.fsmonitor",
    "core.sshCommand",
    "core.gitProxy",
    "core.askPass",
    "core.pager",
    "core.editor",
    "core.alternateRefsCommand",
    "sequence.editor",
    "credential.helper",
    "gpg.program",
    "gpg.ssh.program",
    "gpg.x509.program",
    "gpg.ssh.defaultKeyCommand",
    "alias.status",
    "alias.st",
    "pager.status",
    "pager.diff",
    "pager.log",
    "interactive.diffFilter",
    "trailer.x.command",
    "trailer.x.cmd",
    "difftool.x.cmd",
    "mergetool.x.cmd",
    "browser.x.cmd",
    "man.x.cmd",
    "remote.origin.uploadpack",
    "remote.origin.receivepack",
    "uploadpack.packObjectsHook",
    "submodule.inner.update",
)
HOOKS = (  # what core.hooksPath points at (githooks(5)), each touching a canary
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "fsmonitor-watchman",
)

EVERY_KEY_AGENT = """\
import json, os, subprocess, sys
from pathlib import Path
sys.stdin.read()
canary, mode = sys.argv[1], sys.argv[2]
keys, hooks = json.loads(Path(sys.argv[3]).read_text())
results = {}
def git(*a, cwd=".", check=True):
    r = subprocess.run(["git", *a], cwd=cwd, capture_output=True, text=True)
    if check and r.returncode:
        raise OSError(r.returncode, r.stderr.strip())
    return r.stdout.strip()
def attempt(name, fn):
    try:
        fn()
        results[name] = "done"
    except OSError as e:
        results[name] = f"refused: {e.strerror}"

def program(key):
    run = f"touch {canary}/{key}"
    if key == "credential.helper":
        return "!" + run
    if key.startswith("alias.") or key == "submodule.inner.update":
        return "!" + run
    return run + "; cat"

def config_text(where):
    hookdir = Path(where, "evil-hooks")
    hookdir.mkdir(parents=True, exist_ok=True)
    for h in hooks:
        (hookdir / h).write_text(f"#!/bin/sh\\ntouch {canary}/hook-{h}\\n")
        (hookdir / h).chmod(0o755)
    included = Path(where, "evil-include")
    included.write_text(f"[core]\\n\\tfsmonitor = touch {canary}/include.path\\n")
    lines = []
    for key in keys:
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        lines.append(f'[{head} "{sub}"]' if sub else f"[{head}]")
        lines.append(f"\\t{name} = {json.dumps(program(key))}")
    lines += ["[core]", f"\\thooksPath = {hookdir.resolve()}", "\\tattributesFile = " + str(Path(where, "evil-attributes").resolve())]
    lines += ["[include]", f"\\tpath = {included.resolve()}", '[includeIf "gitdir:/"]', f"\\tpath = {included.resolve()}"]
    Path(where, "evil-attributes").write_text("* filter=x diff=x merge=x\\n")
    return "\\n".join(lines) + "\\n"

def embedded(path, gitdir=None):
    args = ["init", "-q"] + (["--separate-git-dir", gitdir] if gitdir else []) + [path]
    git(*args)
    Path(path, "t.txt").write_text("t\\n")
    git("add", "t.txt", cwd=path)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "t", cwd=path)
    real = Path(gitdir or Path(path, ".git"))
    with open(real / "config", "a") as f:
        f.write(config_text(real))
    (real / "info").mkdir(exist_ok=True)
    (real / "info" / "attributes").write_text("* filter=x diff=x merge=x\\n")
    os.utime(Path(path, "t.txt"), (1, 1))  # dirty to git's eye: hashed again, through the filter
    return git("rev-parse", "HEAD", cwd=path)

# one repository of its own, one whose git directory is elsewhere (a .git file: absorbed in .git/modules
# as submodules are, or for the run that must not add to .git, in a folder of the tree)
absorbed = ".git/modules/mod" if mode != "untracked" else "scratch/mod.git"
os.makedirs(Path(absorbed).parent, exist_ok=True)
subs = {"specs/todo/sub": embedded("specs/todo/sub"), "specs/doing/mod": embedded("specs/doing/mod", absorbed)}
if mode in ("staged", "committed"):
    for path, sha in subs.items():
        git("update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
    Path(".gitmodules").write_text("".join(
        f'[submodule "{Path(s).name}"]\\n\\tpath = {s}\\n\\turl = ./{s}\\n\\tignore = none\\n\\tupdate = !touch {canary}/gitmodules-update\\n'
        for s in subs
    ))
    Path("specs/.gitattributes").write_text("* filter=x diff=x merge=x\\n")
if mode == "committed":
    git("add", ".gitmodules", "specs/.gitattributes")
    git("commit", "-qm", "vendor", "--no-verify")
# the project's own git: where the sandbox lets it, the same keys (config and info/ are read-only mounts)
evil = config_text("scratch")  # outside the artifact roots: no edit of the run's
attempt(".git/config", lambda: open(".git/config", "a").write(evil))
if mode != "untracked":  # a new file among git's own: the run fails, and it is moved aside
    attempt(".git/config.worktree", lambda: open(".git/config.worktree", "w").write(evil))
attempt(".git/info/attributes", lambda: open(".git/info/attributes", "a").write("* filter=x diff=x\\n"))
attempt("git config", lambda: git("config", "core.fsmonitor", f"touch {canary}/project-fsmonitor"))
Path("specs/proposed/user-auth.md").write_text("# User auth\\n\\nRevised.\\n")  # honest work
print(json.dumps(results))
subprocess.run([sys.executable, "-I", "-m", "workflow", "finish", "done", "worked"])
"""


@needs_bwrap
@pytest.mark.parametrize("mode", ["untracked", "staged", "committed"])
def test_no_program_an_agent_names_in_any_git_config_runs_as_the_owner(tmp_path: Path, mode: str) -> None:
    listed = tmp_path / "keys.json"  # outside the project: the agent reads it, nothing in the tree changes
    listed.write_text(json.dumps([PROGRAM_KEYS, HOOKS]))
    p, canary = agent_project(tmp_path, EVERY_KEY_AGENT, mode, str(listed))
    r = run_command_role(p)
    said = [line for line in r.stdout.splitlines() if line.strip().startswith('{".git/config"')]
    assert said, r.stdout + r.stderr
    results = json.loads(said[0])
    assert results[".git/config"].startswith("refused") and results[".git/info/attributes"].startswith("refused")
    assert results["git config"].startswith("refused"), results
    # a run that leaves embedded repositories of its own (untracked) succeeds and its edit is committed;
    # one that stages or commits them (and writes .git/config.worktree) fails and is rolled back
    assert r.returncode == (0 if mode == "untracked" else 1), r.stdout + r.stderr
    assert list(canary.iterdir()) == [], r.stdout
    assert not (p.dir / ".git" / "config.worktree").exists()
    assert "160000" not in sh(p, "git", "ls-files", "-s").stdout + sh(p, "git", "ls-tree", "-r", "HEAD").stdout
    # what the owner runs next: a move (its hooks run), the board, the doctor; a second run of the role
    r = p.run("move", "user-auth", "todo", "--as", "spec-reviewer")
    assert r.returncode == 0, r.stdout + r.stderr
    assert p.run("status").returncode == 0
    p.run("doctor")
    assert list(canary.iterdir()) == []
