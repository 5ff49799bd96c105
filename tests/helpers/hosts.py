"""Hosts: a project's ``[hosts]`` on loopback addresses, and its roles placed on them."""

from __future__ import annotations

from helpers.project import Project
from workflow.core.resources import builtin_dir

HOSTS = """
[hosts.hub]
address = "127.0.0.2"

[hosts.build]
address = "127.0.0.3"
relay_port = 10026
"""


def on_host(p: Project, role: str, host: str) -> None:
    """The project's copy of a built-in role, living on ``host``."""
    text = (builtin_dir("roles") / f"{role}.md").read_text()
    (p.dir / "roles").mkdir(exist_ok=True)
    (p.dir / "roles" / f"{role}.md").write_text(text.replace("+++\n", f'+++\nhost = "{host}"\n', 1))
