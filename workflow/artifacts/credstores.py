"""Credential stores: where the owner's git keeps its logins and tokens — never shown to an agent.

git's ``store`` helper keeps every login in plain text, in ``~/.git-credentials`` and
``$XDG_CONFIG_HOME/git/credentials`` (``~/.config/git/credentials``) or the file its ``--file``
names; the ``cache`` helper answers anyone who reaches its socket (``~/.cache/git/credential/``,
``~/.git-credential-cache/``, or its ``--socket``). A sandbox binds what ``[runs] readable``
names — git's config, say — and ``stores`` lists what it must hide inside, whatever that list
holds: the default places, and those the owner's own git config names for its helpers (system
and global, ``include``s followed), read by the owner's git (``gitcmd``) outside any repository.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from workflow.artifacts import gitcmd
from workflow.core.errors import GitError

HELPERS = r"^credential\..*helper$"  # credential.helper and credential.<url>.helper


def _defaults(env: Mapping[str, str]) -> list[Path]:
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    return [
        home / ".git-credentials",
        config / "git" / "credentials",
        home / ".config" / "git" / "credentials",
        cache / "git" / "credential",
        home / ".cache" / "git" / "credential",
        home / ".git-credential-cache",
    ]


def named_by(helper: str) -> list[Path]:
    """The files a helper's line names with ``--file`` or ``--socket`` (``store --file ~/.creds``;
    ``!git credential-store --file=…``): its store, or its cache's socket."""
    try:
        words = shlex.split(helper.lstrip("!"))
    except ValueError:
        return []
    out = []
    for i, word in enumerate(words):
        for flag in ("--file", "--socket"):
            if word == flag and i + 1 < len(words):
                out.append(words[i + 1])
            elif word.startswith(flag + "="):
                out.append(word[len(flag) + 1 :])
    return [Path(p).expanduser() for p in out if p]


def stores(base: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Every place (absolute; it may not exist) where the owner's git may keep a credential; a
    helper's relative ``--file`` is taken from ``base`` (the project, where an agent's git runs)."""
    env = os.environ if env is None else env
    found = _defaults(env)
    try:
        p = gitcmd.run(["config", "--includes", "--get-regexp", HELPERS], Path(os.sep), env=dict(env), timeout=10)
    except GitError:
        p = None
    if p is not None and p.code == 0:
        for line in p.out.decode("utf-8", "replace").splitlines():
            _, _, helper = line.partition(" ")
            found += [base / f for f in named_by(helper)]
    return list(dict.fromkeys(Path(os.path.normpath(f)) for f in found))
