"""docs/mail-clients.md, run as pasted by a non-root owner: a project made by `workflow init`, bob's
login and role, notmuch, mutt and neomutt (driven in tmux), msmtp, bob's approval by mail applied as
his move, the IMAP server `workflow imap` configures with mbsync and s-nail reading it, and its stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.agentd import wait_until
from helpers.docs import blocks, run
from helpers.dovecot import available
from helpers.git import GIT_ENV
from helpers.owner import RUNUSER, Owner, owner, unavailable
from helpers.tmux import Tmux
from workflow.mail.message import parse

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mail-clients.md"
CLIENTS = ("notmuch", "mlist", "mutt", "neomutt", "msmtp", "mbsync", "s-nail", "tmux", "git")
missing = [c for c in CLIENTS if shutil.which(c) is None]
pytestmark = [
    pytest.mark.skipif(
        bool(missing), reason=f"needs {', '.join(missing)} (scripts/system-packages installs them; .ci/run does)"
    ),
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
]


class Shell:
    """The owner's shell (a user of its own) in its HOME, in a project `workflow init` made there."""

    def __init__(self, o: Owner) -> None:
        self.owner = o
        self.home = o.home
        self.project = o.home / "proj"
        self.project.mkdir(parents=True)
        o.own(self.project)
        self.env = {**o.env(), **GIT_ENV}
        self.user = [RUNUSER, "-u", o.name, "--"]
        self.sections = blocks(PAGE)
        if _listening(IMAP_PORT):  # the page's port is taken here (a Dovecot of a person's own): use another
            other = str(_free_port())
            self.sections = {t: [x.replace(str(IMAP_PORT), other) for x in ls] for t, ls in self.sections.items()}

    def sh(self, *lines: str) -> list[str]:
        return run(list(lines), self.project, self.env, user=self.user)

    def section(self, title: str) -> list[str]:
        return self.sections[title]

    @property
    def mail(self) -> Path:
        return self.home / ".maildir" / "workflow"

    def copies(self, box: str, event: str | None = None) -> list[Path]:
        out = []
        for sub in ("new", "cur"):
            d = self.mail / box / sub
            for f in sorted(d.iterdir()) if d.is_dir() else []:
                if event is None or parse(f.read_bytes()).event == event:
                    out.append(f)
        return out


@pytest.fixture
def shell() -> Iterator[Shell]:
    base = Path(tempfile.mkdtemp(prefix="clients-"))  # pytest's tmp dirs are 0700: the owner could not enter
    os.chmod(base, 0o755)
    try:
        with owner(base) as o:
            s = Shell(o)
            s.sh("git init -q", "workflow init")
            s.sh("printf '# User auth\\n\\nLogin with a password.\\n' > specs/proposed/user-auth.md")
            s.sh("git add -A", "git commit -qm 'spec-writer: propose user-auth'")
            yield s
    finally:
        shutil.rmtree(base, ignore_errors=True)


IMAP_PORT = 1143  # the port the page uses


def _free_port() -> int:
    with socket.socket() as c:
        c.bind(("127.0.0.1", 0))
        return int(c.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as c:
        return c.connect_ex(("127.0.0.1", port)) == 0


def _mutt_reads_without_marking_agents_copies(shell: Shell, program: str) -> None:
    """Open bob's mailbox and an agent role's mailbox, read a message in each; the agent's copy
    stays unread, and no line shows a carriage return."""
    coordinator = shell.copies("coordinator")
    assert coordinator, "the test needs a copy in an agent role's mailbox"
    before = sorted(p.name for p in coordinator)
    mine = ("spec-reviewer", ".workflow")  # bob marks his own mail read; every other file stays as it was
    everything = sorted(str(f) for f in shell.mail.rglob("*") if not set(mine) & set(f.parts))
    line = next(x for x in shell.section("On the project's machine: mutt or neomutt") if x.startswith("mutt "))
    t = Tmux(line.replace("mutt ", f"{program} ", 1), shell.env, shell.project, shell.user)  # the owner's own tmux
    try:
        t.wait("REVIEW REQUEST")  # bob's own mailbox, spec-reviewer: the review-request
        t.keys("Enter")
        page = t.wait("X-Event-Type: review-request")
        assert "^M" not in page and "\r" not in page, page
        t.keys("q")
        t.keys("c")
        t.wait("Open mailbox")
        t.keys("C-u", "+coordinator", "Enter")
        t.wait("[BLOCKED]")
        t.keys("Enter")
        t.wait("X-Event-Type: blocker-report")
        t.keys("q")
        t.keys("s")  # save-message: off, nothing is written into a mailbox from mutt
        t.keys("C")  # copy-message: off too
        t.keys("q")
        end = time.monotonic() + 10
        while subprocess.run([*t.sock, "has-session"], capture_output=True, env=t.env).returncode == 0:
            if time.monotonic() > end:
                t.keys("y")  # an unexpected "quit?" prompt
                break
            time.sleep(0.05)
    finally:
        t.close()
    assert sorted(p.name for p in shell.copies("coordinator")) == before  # same names: no S flag added
    assert sorted(str(f) for f in shell.mail.rglob("*") if not set(mine) & set(f.parts)) == everything


def test_the_mail_clients_page_works_as_pasted(shell: Shell) -> None:
    shell.sh(*shell.section("A login for each person"))
    shell.sh("git add -A", "git commit -qm 'bob reviews specs'")
    port = int(
        next(x for x in (shell.project / "workflow.toml").read_text().splitlines() if x.startswith("port")).split()[2]
    )
    up = shell.owner.popen("workflow up", shell.project)
    dovecot = False
    try:
        wait_until(lambda: _listening(port) and "agentd.jsonl" in os.listdir(shell.mail / ".workflow"), "workflow up")
        shell.sh(
            "workflow notify --from spec-writer review-request specs/proposed/user-auth.md spec-reviewer",
            "workflow notify --from implementer blocker-report specs/proposed/user-auth.md coordinator BLOCKING_DETAILS='tests fail'",
        )
        # notmuch: every search the page shows finds what it says
        found = shell.sh(*shell.section("On the project's machine: notmuch"))
        for line, said in zip(shell.section("On the project's machine: notmuch"), found, strict=True):
            if line.startswith("notmuch search") or line.startswith("notmuch show"):
                assert said.strip(), f"as pasted, this finds nothing: {line}"
                assert "\r" not in said
        # the review-request as notmuch shows it, with the spec's text it now carries for people
        assert "REVIEW REQUEST" in found[-1] and "Login with a password" in found[-1]
        assert (
            sorted(x.name for x in shell.mail.iterdir())
            == sorted(  # notmuch's database is not in it
                x.name for x in shell.mail.iterdir() if x.name != ".notmuch"
            )
            and not (shell.mail / ".notmuch").exists()
        )

        mblaze = shell.sh(*shell.section("On the project's machine: mblaze"))
        assert "REVIEW REQUEST" in mblaze[0] and "review-request" in mblaze[1], mblaze
        assert "spec-writer asks you to review" in mblaze[2] and "\r" not in mblaze[2], mblaze[2]

        mutt = shell.section("On the project's machine: mutt or neomutt")
        shell.sh(*[x for x in mutt if not x.startswith("mutt ")])
        _mutt_reads_without_marking_agents_copies(shell, "mutt")
        _mutt_reads_without_marking_agents_copies(shell, "neomutt")

        shell.sh(*shell.section("Sending from a terminal: msmtp"))
        wait_until(lambda: any(b"login errors" in p.read_bytes() for p in shell.copies("spec-writer")), "msmtp's mail")

        # over IMAP: Dovecot as the owner, started as printed; mbsync pulls bob's mailbox, s-nail lists it
        shell.sh(*shell.section("From anywhere: IMAP"))
        dovecot = True
        said = shell.sh(*shell.section("Reading over IMAP: mbsync, s-nail, Thunderbird"))
        pulled = list((shell.home / "Mail" / "workflow-bob" / "INBOX").glob("*/*"))
        assert any(b"X-Event-Type: review-request" in f.read_bytes() for f in pulled), pulled
        assert "REVIEW REQUEST" in said[2], said  # s-nail's header summary
        assert "Incoming (IMAP):      127.0.0.1  port " in said[3], said[3]

        # bob, who read it over IMAP, approves from a terminal with msmtp: his move, one commit, and spec-writer is told
        commits = int(shell.sh("git rev-list --count HEAD")[0])
        shell.sh(*shell.section("Deciding by mail"))
        wait_until(lambda: (shell.project / "specs/todo/user-auth.md").exists(), "bob's approval to be applied")
        wait_until(lambda: int(shell.sh("git rev-list --count HEAD")[0]) == commits + 1, "the commit")
        head = shell.sh("git log -1 --format='%an %s'")[0]
        assert head.startswith("spec-reviewer spec-reviewer: approve user-auth"), head
        wait_until(lambda: shell.copies("spec-writer", "approval"), "spec-writer to be told")
    finally:
        if dovecot:
            shell.sh(*shell.section("Stopping the IMAP server"))
        print(shell.owner.stop(up))


def test_the_imap_lines_are_said_once_on_this_page() -> None:
    """docs/mail-server.md's IMAP section names this page's Dovecot lines and runs none of its own:
    the lines a person pastes are this page's, which the test above runs as pasted."""
    imap = (PAGE.parent / "mail-server.md").read_text().split("## `workflow imap`", 1)[1].split("\n## ", 1)[0]
    assert "```bash" not in imap and "mail-clients.md" in imap
    ran = {line for section in blocks(PAGE).values() for line in section}
    assert any(line.startswith("workflow imap --write ~/.config/workflow/imap --port 1143") for line in ran)
    assert "/usr/sbin/dovecot -c ~/.config/workflow/imap/dovecot.conf" in ran
