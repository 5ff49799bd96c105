"""Role file: set one front matter key of a role in the project's ``roles/`` — copied from the
built-in role when the project has none — so a team's choice (a person takes it, a host runs it)
is a committed file every host reads alike."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workflow.core.config import Config
from workflow.core.errors import WorkflowError
from workflow.core.resources import builtin_dir
from workflow.delivery.credentials import ROLE_RE


def with_key(config: Config, role: str, key: str, value: str, description: str = "") -> Path | None:
    """``roles/ROLE.md`` with ``key = "value"`` in its front matter (a new role, described so, when
    there is no built-in one). Returns the file written, None when it already said so."""
    if not ROLE_RE.match(role):
        raise WorkflowError(f"{role!r} is not a role name (lower-case letters, digits, . _ -)")
    mine = config.roles_dir / f"{role}.md"
    builtin = builtin_dir("roles") / f"{role}.md"
    line = f"{key} = {json.dumps(value)}"
    if mine.exists():
        text = mine.read_text(encoding="utf-8")
    elif builtin.exists():
        text = builtin.read_text(encoding="utf-8")
    else:
        about = description or f"{role}: a person's role."
        text = f"+++\n{line}\ndescription = {json.dumps(about)}\n+++\n\n# {role}\n"
    head, sep, rest = text.partition("\n+++")
    if not text.startswith("+++") or not sep:
        raise WorkflowError(f"{mine}: expected TOML front matter between +++ lines; add {line} by hand")
    pattern = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    head = pattern.sub(line, head, count=1) if pattern.search(head) else head.replace("+++", f"+++\n{line}", 1)
    new = head + sep + rest
    if mine.exists() and new == text:
        return None
    config.roles_dir.mkdir(parents=True, exist_ok=True)
    mine.write_text(new, encoding="utf-8")
    return mine
