"""History: what the commits made while a run was open did — control files changed behind the tree's back, commits in another's name, the artifacts they touched.

An agent can commit with git itself, and with git's plumbing it can write history the working
tree never had. When its run ends these say what its commits did, so the run fails (a control
file changed only in history, a commit claiming a person's role or the owner's name) or its
rollback puts the artifacts they changed back.
"""

from __future__ import annotations

from workflow.artifacts import agentfiles, plumbing
from workflow.artifacts.edits import printable
from workflow.artifacts.gitrepo import Repo
from workflow.core import control
from workflow.core.config import Config


def foreign_commits(config: Config, since: str | None, role: str) -> list[str]:
    """The commits made since ``since`` by anyone but our own code (``plumbing.ours``) whose
    author or committer is not ``role`` — an agent sets ``GIT_AUTHOR_*`` itself and may claim a
    person's role or the owner's name: ``"SHA (Name <email> / Name <email>)"`` for each."""
    repo = Repo.find(config)
    if repo is None or not since or repo.head() in (None, since):
        return []
    want = f"{role} <{role}@{config.domain}>"
    out = []
    log = repo.git("log", "-z", "--format=%H%x01%an <%ae>%x01%cn <%ce>", f"{since}..HEAD", check=False)
    # the ledger read after the log: our code notes a commit before HEAD names it, so every commit
    # of ours the log shows is in it (read first, another run's commit made between the two reads
    # was taken for this run's agent's)
    mine = plumbing.ours(config)
    for entry in log.split("\0"):
        sha, _, who = entry.strip("\n").partition("\x01")
        author, _, committer = who.partition("\x01")
        if sha and sha not in mine and (author != want or committer != want):
            out.append(f"{sha[:10]} ({printable(author)} / {printable(committer)})")
    return out


def control_changes(config: Config, since: str | None) -> list[str]:
    """Control files and agent files (``agentfiles``) that commits made since ``since`` changed
    *without* the working tree having that change: an agent cannot write the control files (its
    sandbox binds them read-only) but can forge history with git's plumbing; a person edits the
    file and commits it, so their change is in both and is never taken for the agent's."""
    repo = Repo.find(config)
    if repo is None or not since or repo.head() in (None, since):
        return []
    spec = [repo.to_top(p) for p in control.inside(config)] + agentfiles.pathspecs(config)
    moved = repo.git("diff", "--name-only", "-z", "--no-renames", since, "HEAD", "--", *spec, check=False)
    differ = set(repo.git("diff", "--name-only", "-z", "--no-renames", "HEAD", "--", *spec, check=False).split("\0"))
    untracked = set(repo.git("ls-files", "-z", "--others", "--", *spec, check=False).split("\0"))
    out = [x for x in moved.split("\0") if x and (x in differ or x in untracked)]
    return sorted(p for p in (repo.to_project(x) for x in out) if p is not None)


def committed_since(config: Config, since: str | None) -> list[str]:
    """Artifact paths that commits made since ``since`` changed (a shell agent may commit with
    git itself: a failed run's commits are put back like the rest of its edits)."""
    repo = Repo.find(config)
    if repo is None or not since or repo.head() in (None, since):
        return []
    roots = [repo.to_top(r) for r in config.artifact_roots]
    out = repo.git("diff", "--name-only", "-z", "--no-renames", since, "HEAD", "--", *roots, check=False)
    return sorted(p for p in (repo.to_project(x) for x in out.split("\0") if x) if p is not None)
