"""People: alice (the user role) and bob (spec-reviewer, made a human role) as users-file logins,
and the real msmtp sending as them, as a phone or a terminal would: no workflow header of ours."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.project import Project, with_smtp
from helpers.tiers import spawning
from workflow.delivery.credentials import hash_password

REVIEWER = '+++\nmode = "human"\ndescription = "bob reviews specs from his mail client"\n+++\n\n# spec-reviewer\n'
PEOPLE = {"alice": ("user", "alice-pw"), "bob": ("spec-reviewer", "bob-pw")}


def add_people(p: Project) -> Project:
    """The project with alice's and bob's logins beside the tester's, and spec-reviewer a person's role."""
    users = Path(p.app.config.smtp.auth_users_file)
    lines = users.read_text()
    for login, (role, password) in PEOPLE.items():
        lines += f"{login}:{hash_password(password, 'peoplesalt', 1)}:{role}\n"
    users.write_text(lines)
    (p.dir / "roles").mkdir(exist_ok=True)
    (p.dir / "roles" / "spec-reviewer.md").write_text(REVIEWER)
    return with_smtp(p, "")


@spawning
def msmtp(p: Project, login: str, port: int, text: str) -> subprocess.CompletedProcess[str]:
    """Send ``text`` (headers, an empty line, the body) with the real msmtp as ``login``."""
    role, password = PEOPLE[login]
    rc = p.dir.parent / f"msmtprc-{login}"
    rc.write_text(
        "defaults\nauth plain\ntls off\n\naccount default\nhost 127.0.0.1\n"
        f"port {port}\nfrom {role}@{p.app.config.domain}\nuser {login}\npassword {password}\n"
    )
    rc.chmod(0o600)
    head = f"From: {login.capitalize()} <{role}@{p.app.config.domain}>\n"
    return subprocess.run(["msmtp", "-C", str(rc), "-t"], input=head + text, capture_output=True, text=True, timeout=30)
