"""The mail user (``ops.mailuser``): what `workflow imap` run by root hands the user Dovecot reads
root's mail as. It may pass through the folders above the mail root (one ACL entry: search, no
read), never list them; a message root delivers into a Maildir it was handed is its own, by the
tmp/ path and by the unnamed one; the mail root stays clean for doctor's mode check."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from workflow.core import modes
from workflow.mail.maildir import Maildirs
from workflow.mail.unnamed import Unnamed
from workflow.ops import mailuser

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None or shutil.which("useradd") is None,
    reason="handing folders to another user needs root, runuser and useradd",
)


def as_mail_user(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", mailuser.NAME, "--", *argv], capture_output=True, text=True, timeout=30)


def test_it_passes_through_closed_folders_and_reads_nothing_else(tmp_path: Path) -> None:
    user = mailuser.ensure()
    assert mailuser.ensure() == user  # made once
    top = tmp_path / "root-home"
    inner = top / ".maildir"
    mail = inner / "workflow"
    mail.mkdir(parents=True)
    for d in (top, inner):
        os.chmod(d, 0o700)
    (top / "secret").write_text("owner's")
    os.chmod(top / "secret", 0o600)  # the owner's files are 0600 (core.modes); one open to all could be read by name
    mailuser.hand_over(mail, user, whole=False)
    assert as_mail_user("test", "-x", str(mail)).returncode != 0  # shut out before
    given = mailuser.let_pass(mail.parent, user)
    assert top in given and inner in given
    assert as_mail_user("test", "-x", str(mail)).returncode == 0, "it passes through"
    assert as_mail_user("ls", str(top)).returncode != 0, "it cannot list what it passes"
    assert as_mail_user("cat", str(top / "secret")).returncode != 0
    assert mailuser.let_pass(mail.parent, user) == []  # again: nothing more to give
    # the owner's own rights are kept
    assert os.stat(top).st_mode & 0o700 == 0o700


def test_a_folder_with_an_acl_of_its_own_keeps_it(tmp_path: Path) -> None:
    user = mailuser.ensure()
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    other = subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True).stdout.strip()
    before = {(mailuser.USER_OBJ, mailuser.NO_ID): 7, (mailuser.USER, int(other)): 5}
    before |= {(mailuser.GROUP_OBJ, mailuser.NO_ID): 0, (mailuser.MASK, mailuser.NO_ID): 5}
    before |= {(mailuser.OTHER, mailuser.NO_ID): 0}
    os.setxattr(d, mailuser.ACL, mailuser._pack(before))
    mailuser.let_pass(d, user)
    after = mailuser._parse(os.getxattr(d, mailuser.ACL))
    assert after[(mailuser.USER, int(other))] == 5 and after[(mailuser.USER, user.uid)] == 1, after


def test_root_delivers_into_a_handed_maildir_as_its_owners_mail(tmp_path: Path) -> None:
    user = mailuser.ensure()
    boxes = Maildirs(tmp_path / "mail")
    boxes.ensure("spec-reviewer")
    boxes.ensure("spec-writer")
    mailuser.hand_over(tmp_path / "mail", user, whole=False)  # as `workflow imap` does
    mailuser.hand_over(tmp_path / "mail" / "spec-reviewer", user)
    mailuser.let_pass(tmp_path, user)
    handed, kept = boxes.deliver(["spec-reviewer", "spec-writer"], b"Subject: hi\r\n\r\nbody\r\n")
    assert os.stat(handed.path).st_uid == user.uid and os.stat(kept.path).st_uid == 0
    unnamed = Unnamed()
    if unnamed.available:  # the server's committer writes its copies with no name first
        box = boxes.dir("spec-reviewer")
        fd = unnamed.write(box, b"Subject: again\r\n\r\n")
        assert fd is not None
        try:
            path = unnamed.link(fd, box, boxes.new_name())
        finally:
            os.close(fd)
        assert os.stat(path).st_uid == user.uid
        assert as_mail_user("cat", path).stdout.startswith("Subject: again")
    assert modes.loose(tmp_path / "mail") == []
