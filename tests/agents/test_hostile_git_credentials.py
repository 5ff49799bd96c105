"""The sandbox binds `[runs] readable` into every run, by default `~/.gitconfig` and — it was —
the whole of `~/.config/git`, where git's credential store keeps the owner's tokens
(`credential.helper = store` reads and writes `$XDG_CONFIG_HOME/git/credentials`): every agent
read them. Now the default names git's config files only, and no credential store is ever
bound, whatever `readable` names (``artifacts.credstores``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.hostile import agent_project
from helpers.runs import run_command_role
from helpers.sandboxing import needs_bwrap

AGENT = """\
import os, sys
from pathlib import Path
sys.stdin.read()
try:  # the sandbox's $HOME is the owner's path, an empty tmpfs — but for what [runs] readable binds
    Path("stolen").write_text(Path(os.path.expanduser("~/.config/git/credentials")).read_text())
except OSError:
    pass
finish("done", "nothing")
"""


@needs_bwrap
def test_an_agent_never_reads_the_owners_git_credentials(tmp_path: Path) -> None:
    store = Path(os.path.expanduser("~/.config/git/credentials"))
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text("https://owner:ghp_SECRETTOKEN@github.com\n")
    store.chmod(0o600)
    try:
        p = agent_project(tmp_path / "gc", AGENT)  # (a path in argv would be bound: none is given)
        r = run_command_role(p, "spec-reviewer")
        assert r.returncode == 0, r.stdout + r.stderr
        stolen = p.dir / "stolen"
        assert not stolen.exists() or "ghp_SECRETTOKEN" not in stolen.read_text(), "the agent read the token"
    finally:
        store.unlink()


READER = """\
import json, os, subprocess, sys
from pathlib import Path
sys.stdin.read()
seen = {}
for name in ("~/.git-credentials", "~/.config/git/credentials", "~/.config/git/tokens", "~/.cache/git/credential/socket"):
    try:
        seen[name] = Path(os.path.expanduser(name)).read_text()
    except OSError as e:
        seen[name] = f"unreadable: {e.strerror}"
    try:
        Path(os.path.expanduser(name)).write_text("mine")
        seen[name + " written"] = "yes"
    except OSError:
        pass
seen["alias"] = subprocess.run(["git", "config", "alias.st"], capture_output=True, text=True).stdout.strip()
print("SEEN " + json.dumps(seen))
finish("done", "nothing")
"""


@needs_bwrap
def test_no_credential_store_is_bound_whatever_readable_names_and_git_config_still_is(tmp_path: Path) -> None:
    home = tmp_path / "home"  # the owner's home for this run: its git config names a store of its own
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".cache" / "git" / "credential").mkdir(parents=True)
    (home / ".gitconfig").write_text(
        "[alias]\n\tst = status\n[credential]\n\thelper = store --file ~/.config/git/tokens\n"
    )
    secrets = {
        ".git-credentials": "https://owner:ghp_HOME@github.com\n",
        ".config/git/credentials": "https://owner:ghp_XDG@github.com\n",
        ".config/git/tokens": "https://owner:ghp_HELPER@github.com\n",
        ".cache/git/credential/socket": "a cache daemon's socket\n",
    }
    for rel, text in secrets.items():
        (home / rel).write_text(text)
    readable = '["~/.gitconfig", "~/.config/git", "~/.git-credentials", "~/.cache/git"]'
    p = agent_project(tmp_path / "gc", READER, extra=f"\n[runs]\nreadable = {readable}\n")
    r = run_command_role(p, "spec-reviewer", env={"HOME": str(home), "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    seen = json.loads(r.stdout[r.stdout.index("SEEN ") + 5 :].splitlines()[0])
    assert not any("ghp_" in v or "daemon" in v or k.endswith("written") for k, v in seen.items()), seen
    assert seen["alias"] == "status", seen  # git's config is still the agent's to read
    assert {rel: (home / rel).read_text() for rel in secrets} == secrets
