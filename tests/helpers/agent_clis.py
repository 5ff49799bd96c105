"""The real agent CLIs ``scripts/agent-clis`` installs from npm, for tests that drive them against a
stand-in model API (``helpers.model_api``); a test skips, saying why, where one is missing."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers.fake_anthropic import FakeAnthropic, text, tool_use
from helpers.git import GIT_ENV
from helpers.tiers import spawning
from workflow.mail.message import parse

# the user's real home (the tests give every process a scratch $HOME), as scripts/agent-clis sees it
HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
DIR = Path(os.environ.get("WORKFLOW_AGENT_CLIS") or HOME / ".cache" / "workflow-mail" / "agent-clis")


def cli_bin() -> Path:
    """The folder of the installed CLIs' commands (``claude``…)."""
    return DIR / "node_modules" / ".bin"


def needs(command: str, name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (cli_bin() / command).exists(),
        reason=f"{name} is not installed in {DIR} (scripts/agent-clis installs it; .ci/run runs that)",
    )


# the owner's variables a test's processes never inherit: the project's, and the model providers'
OWNERS = ("WORKFLOW_", "ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_")

needs_claude = needs("claude", "Claude Code")
needs_codex = needs("codex", "Codex")
needs_gemini = needs("gemini", "Gemini CLI")


class Fresh(NamedTuple):
    """A project as a new user makes it: ``git init``, ``workflow init`` with the agent CLIs on
    PATH and no configuration edited, the spec committed in proposed/; its own home directory."""

    dir: Path
    home: Path
    path: str  # PATH with the CLIs first

    def env(self, **more: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(OWNERS)}
        return {**base, **GIT_ENV, "HOME": str(self.home), "PATH": self.path, **more}

    def run(self, *args: str, tool: str = "workflow", **env: str) -> subprocess.CompletedProcess[str]:
        # the installed command, as a user runs it (never `python -m`, which a `workflow/` in the tree shadows)
        cmd = [str(Path(sys.executable).parent / "workflow"), *args] if tool == "workflow" else [tool, *args]
        return subprocess.run(cmd, cwd=self.dir, env=self.env(**env), capture_output=True, text=True, timeout=180)

    def notify(self, *args: str) -> str:
        """``workflow-notify ARGS`` as the owner; the Message-ID it printed."""
        r = self.run("notify", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        return next(w for w in r.stdout.split() if w.startswith("<") and "@" in w).rstrip(":,")

    def mail_root(self) -> Path:
        """This project's mail root (the one whose record names it)."""
        for root in (self.home / ".maildir").iterdir():
            if (root / ".workflow" / "project").read_text().strip() == str(self.dir):
                return root
        raise AssertionError(f"no mail root of {self.dir} under {self.home}")

    def maildir(self, box: str) -> Path:
        """The role's Maildir (a path with no folders when nothing was delivered to it yet)."""
        return self.mail_root() / box

    def unread(self, box: str) -> int:
        d = self.maildir(box)

        def names(sub: str) -> list[str]:  # a mailbox being made may have new/ and no cur/ yet
            try:
                return os.listdir(d / sub)
            except FileNotFoundError:
                return []

        return len(names("new")) + len([n for n in names("cur") if "S" not in n.split(",")[-1]])

    def events(self, box: str) -> list[str]:
        """The event types in ``box``, read while deliveries may go on: a mailbox being made may
        have new/ and no cur/ yet, and a message may move from new/ to cur/ as it is listed."""
        d = self.maildir(box)
        out = []
        for sub in ("new", "cur"):
            try:
                names = os.listdir(d / sub)
            except FileNotFoundError:
                continue
            for name in names:
                try:
                    out.append(parse((d / sub / name).read_bytes()).event or "")
                except FileNotFoundError:  # read in cur/ on the next look
                    continue
        return sorted(out)

    def commits(self) -> list[str]:
        r = subprocess.run(["git", "log", "--format=%an %s"], cwd=self.dir, capture_output=True, text=True, check=True)
        return r.stdout.splitlines()


@spawning
def fresh_project(base: Path, home: Path | None = None, name: str = "project") -> Fresh:
    """``home``: another project's home, for two projects of one user (each gets its own mail root)."""
    d = base / name
    d.mkdir(parents=True)
    f = Fresh(d, home or base / "home", f"{cli_bin()}:{os.environ['PATH']}")
    f.home.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    r = f.run("init")
    assert r.returncode == 0, r.stdout + r.stderr
    (d / "specs" / "proposed" / "user-auth.md").write_text("# User auth\n\nUsers log in with a password.\n")
    subprocess.run(["git", "add", "-A"], cwd=d, check=True, env=f.env())
    subprocess.run(["git", "commit", "-qm", "spec-writer: propose user-auth"], cwd=d, check=True, env=f.env())
    return f


def approve_turns(api: FakeAnthropic, request: str) -> None:
    """The model's turns of spec-reviewer's approval of user-auth by the role's MCP tools (a CLI names them
    ``mcp__workflow__…``): move it to todo/, send the approval in reply to ``request``, finish."""
    move = {"artifact": "specs/proposed/user-auth.md", "state": "todo", "reason": "complete and testable"}
    api.add(tool_use("mcp__workflow__move_artifact", move, "toolu_2"))
    approval = {
        "event": "approval",
        "artifact": "specs/todo/user-auth.md",
        "to": ["spec-writer"],
        "in_reply_to": request,
    }
    api.add(tool_use("mcp__workflow__send_message", approval, "toolu_3"))
    api.add(tool_use("mcp__workflow__finish", {"status": "done", "summary": "Approved user-auth."}, "toolu_4"))
    api.add(text("Approved user-auth."))


@spawning
def agentd_until_approval(f: Fresh, env: dict[str, str]) -> str:
    """`workflow agentd run` in ``f`` until spec-writer has the approval (90 s at most); its log."""
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "workflow"), "agentd", "run", "--rescan", "0.2"],
        cwd=f.dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while f.events("spec-writer") != ["approval"] and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        daemon.terminate()
        log, _ = daemon.communicate(timeout=60)
    return log


def run_page_reads(transcript: str) -> None:
    """The cockpit's run page reads this CLI's own transcript: its move and its mail, tagged (issue 49)."""
    from workflow.web.transcripts import steps  # lazy: only the run-page checks need the web layer

    calls = [st for st in steps(Path(transcript).read_text()) if st.kind == "call"]
    assert any(st.tag == "move" and "move_artifact" in st.text for st in calls), calls
    assert any(st.tag == "mail" and "send_message" in st.text for st in calls), calls
