"""The control plane is one list: every file the config names, whatever section names it, read
the way its reader reads it — and a key that names a file cannot be declared without joining it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_type_hints

from workflow.bridges.sections import SECTIONS
from workflow.core import control
from workflow.core.backendconfig import BACKEND_SECTIONS
from workflow.core.config import load_config
from workflow.core.schema import Owned, Section, Tables
from workflow.core.sections import CORE_SECTIONS

FILE_LIKE = re.compile(r"(_file|_dir|_cert|_key|_command|_path)$|^(dir|script|program|argv|args)$")
NOT_OWNED = {  # keys that name a path, and why they are not the owner's to guard here
    ("workflow", "mail_root"),  # hidden from every sandbox, not only read-only
    ("workflow", "roles_dir"),  # Config.roles_dir: control.named lists it
    ("workflow", "templates_dir"),  # Config.templates_dir: likewise
    ("scripted", "record_dir"),  # written by run-role (what a run saw), never read as policy
}

TOML = """\
[smtp]
auth_users_file = "conf/people"
tls_cert = "~/certs/cert.pem"
tls_key = "conf/key.pem"

[web]
tls_key = "/etc/workflow/web.key"

[backends.command]
argv = ["python3", "agent.py", "-p", "not-a-file"]

[backends.claude-code]
program = "bin/claude"

[backends.scripted]
dir = "steps"

[bridges.gmail]
imap_host = "imap.example"
user = "me"
password_file = "conf/gmail"
xoauth2_command = "tools/token --for me"
"""


def _sections() -> list[tuple[str, Section[Any]]]:
    found = [(name, s) for name, s in CORE_SECTIONS.items()] + list(BACKEND_SECTIONS.items())
    found += [(p.name, p.section) for p in SECTIONS]
    todo = list(found)
    while todo:  # nested tables ([bridges.gmail.agents.NAME])
        _, section = todo.pop()
        for spec in section.specs.values():
            if isinstance(spec, Tables):
                todo += list(spec.sections.items())
                found += list(spec.sections.items())
    return found


def test_every_key_that_names_a_file_is_declared_owned() -> None:
    loose = []
    for name, section in _sections():
        hints = get_type_hints(section.type, include_extras=True)
        for key in section.specs:
            spec = next((m for m in getattr(hints[key], "__metadata__", ())), None)
            if FILE_LIKE.search(key) and not isinstance(spec, Owned) and (name, key) not in NOT_OWNED:
                if not key.endswith("_env"):
                    loose.append(f"[{name}] {key}")
    assert loose == [], "declare these schema.Owned (core.control guards them), or say why not in NOT_OWNED"


def test_the_control_plane_lists_what_every_section_names_as_its_reader_reads_it(tmp_path: Path) -> None:
    (tmp_path / "workflow.toml").write_text(TOML)
    (tmp_path / "agent.py").write_text("")
    config = load_config(cwd=tmp_path, env={}, plugins=SECTIONS)
    assert config.smtp.auth_users_file == str(tmp_path / "conf" / "people")  # one reading, at load
    assert config.smtp.tls_cert == str(Path("~/certs/cert.pem").expanduser())
    named = {n.key: n for n in control.named(config)}
    assert named["[smtp] tls_key"].secret and named["[bridges.gmail] password_file"].secret
    assert not named["[smtp] auth_users_file"].secret and named["[backends.scripted] dir"].folder
    assert named["[backends.command] argv"].path == tmp_path / "agent.py"  # a file it is given; python3 is PATH's
    assert control.inside(config) == [
        "workflow.toml",
        "roles",
        "email-templates",
        ".workflow",
        "conf/people",
        "conf/key.pem",
        "agent.py",
        "steps",
        "bin/claude",
        "conf/gmail",
        "tools/token",
    ]
