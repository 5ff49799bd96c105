"""Issue 48's acceptance for the artifact in the mail: bob's review-request, served by a real
Dovecot, pulled by mbsync and shown by mutt in tmux, holds the spec's text; after a revision,
the next request holds the diff inline and as a text/x-diff attachment."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers.dovecot import PASSWORD, USER, Dovecot, available
from helpers.git import git_project, sh
from helpers.project import Project
from helpers.tmux import Tmux

SPEC = "specs/proposed/user-auth.md"
pytestmark = [
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(
        any(shutil.which(c) is None for c in ("mbsync", "mutt", "tmux")), reason="needs mbsync, mutt and tmux"
    ),
]


def notify(p: Project, *args: str) -> bytes:
    """``workflow-notify`` as a person types it; the stored copy in spec-reviewer's Maildir."""
    before = set(p.new_files("spec-reviewer"))
    r = p.run("--from", "spec-writer", *args, tool="workflow-notify")
    assert r.returncode == 0, r.stderr
    (new,) = set(p.new_files("spec-reviewer")) - before
    return new.read_bytes()


def serve(d: Dovecot, raw: bytes, n: int) -> None:
    """Put the stored copy where Dovecot reads bob's INBOX (as `workflow imap` serves the role's Maildir)."""
    f = d.mail / "new" / f"{time.time_ns()}.{n}.test"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(raw)
    subprocess.run(["chown", "-R", "65534:65534", str(d.mail)], check=True)


def mbsync(d: Dovecot, home: Path) -> Path:
    local = home / "Mail" / "workflow"
    local.mkdir(parents=True, exist_ok=True)
    rc = home / ".mbsyncrc"
    rc.write_text(
        f"IMAPAccount wf\nHost 127.0.0.1\nPort {d.port}\nUser {USER}\nPass {PASSWORD}\nSSLType None\nAuthMechs LOGIN\n\n"
        "IMAPStore wf-remote\nAccount wf\n\n"
        f"MaildirStore wf-local\nPath {local}/\nInbox {local}/INBOX\n\n"
        "Channel wf\nFar :wf-remote:\nNear :wf-local:\nPatterns INBOX\nSync Pull\nCreate Near\n"
    )
    r = subprocess.run(["mbsync", "-c", str(rc), "-a"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return local / "INBOX"


def mutt(box: Path, home: Path) -> Tmux:
    """bob's mutt on the Maildir mbsync filled, in a terminal of its own."""
    (home / ".muttrc").write_text("set sort=date\nset pager_stop=yes\nset pager_index_lines=0\nset mark_old=no\n")
    return Tmux(f"mutt -F {home / '.muttrc'} -f {box}", {**os.environ, "HOME": str(home)}, home, rows=60)


def test_bob_reads_the_spec_then_its_diff_in_mutt(tmp_path: Path, dovecot: Dovecot) -> None:
    p = git_project(tmp_path / "proj")
    home = tmp_path / "bob"
    home.mkdir()
    spec = p.dir / SPEC
    spec.write_text("# User auth\n\nSessions end after ONE-HOUR-IDLE.\n")
    sh(p, "git", "commit", "-qam", "spec-writer: user-auth")
    serve(dovecot, notify(p, "review-request", SPEC, "spec-reviewer"), 1)
    box = mbsync(dovecot, home)
    m = mutt(box, home)
    try:
        m.wait("REVIEW REQUEST")
        m.keys("Enter")
        page = m.wait("ONE-HOUR-IDLE")  # the spec's text, in the pager, from the copy mbsync pulled
        assert "user-auth.md" in page and "X-Workflow-Copy" not in page
    finally:
        m.close()

    spec.write_text("# User auth\n\nSessions end after FIFTEEN-MINUTES-IDLE.\n")  # the revision
    sh(p, "git", "commit", "-qam", "spec-writer: shorter sessions")
    serve(dovecot, notify(p, "review-request", SPEC, "spec-reviewer"), 2)
    box = mbsync(dovecot, home)
    m = mutt(box, home)
    try:
        m.wait("REVIEW REQUEST", times=2)
        # the newest: found by what it says (both may carry the same Date, to the second)
        m.keys("/")
        m.wait("Search for:")
        m.keys("~B FIFTEEN-MINUTES-IDLE", "Enter")
        m.keys("Enter")
        page = m.wait("+Sessions end after FIFTEEN-MINUTES-IDLE.")
        assert "-Sessions end after ONE-HOUR-IDLE." in page
        m.keys("v")  # the attachments of the message
        listing = m.wait("user-auth.md.diff")
        assert "text/x-diff" in listing, listing
    finally:
        m.close()
