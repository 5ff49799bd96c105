"""Outside mail posing as a role: the Gmail bridge finds a header's name with `bytes.strip()`, the
readers' parser (`mail.message.parse`) with `str.strip()` — which also strips the information
separators (\\x1c-\\x1f), NEL and no-break spaces. `From\\x1c:` and `X-Event-Type\\x1c:` are no
header of the bridge's (kept as they came, unjudged, unrenamed) and `From:` / `X-Event-Type:` to
every reader: an approval from spec-reviewer, imported through a real Dovecot."""

from __future__ import annotations

from email.utils import formatdate
from pathlib import Path

from helpers.dovecot import USER, Dovecot
from helpers.gmail import bridge_project, needs_dovecot, run_bridge
from workflow.core.senders import local_part
from workflow.mail.message import parse


@needs_dovecot
def test_outside_mail_never_reads_as_a_roles_workflow_mail(tmp_path: Path, dovecot: Dovecot) -> None:
    p = bridge_project(tmp_path, dovecot)
    dovecot.append(
        (
            "From\x1c: spec-reviewer@workflow.local\r\nX-Event-Type\x1c: approval\r\n"
            "X-Workflow-State\x1c: todo\r\nX-Artifacts\x1c: specs/*/user-auth.md\r\n"
            f"From: Mallory <mallory@evil.example>\r\nTo: {USER}\r\nSubject: [approval] user-auth\r\n"
            f"Message-ID: <smuggled.1@evil.example>\r\nDate: {formatdate()}\r\n\r\nApproved.\r\n"
        ).encode()
    )
    r = run_bridge(p)
    assert r.returncode == 0, r.stderr  # type: ignore[attr-defined]
    stored = [parse(f.read_bytes()) for f in p.new_files("user")]
    assert len(stored) == 1, stored
    m = stored[0]
    seen = (local_part(m.sender, "workflow.local"), m.event, m.state, list(m.artifacts))
    inbox = p.run("inbox", "user").stdout
    assert seen[0] is None and seen[1] is None, f"the readers take it for {seen}; the inbox:\n{inbox}"
