"""Ownership: a mail root belongs to one project, so two projects never see each other's mail.

The owning project's directory is recorded in ``<mail root>/.workflow/project``. ``check`` runs
before every command: no project (no workflow.toml here or above, none named) is refused with
how to make or name one; a root owned by another project is refused with one line naming both;
an unowned root is claimed for this project. ``choose`` picks a new project's root for
``workflow init``: ``~/.maildir/workflow`` for the first project on the machine, else
``~/.maildir/workflow-NAME`` (NAME from the project's directory), never a root another project
owns or has used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from workflow.core.config import Config
from workflow.core.errors import ConfigError
from workflow.core.modes import private_dirs
from workflow.core.statedir import StateDir

DEFAULT = "~/.maildir/workflow"


def owner(mail_root: Path) -> Path | None:
    """The directory of the project that owns ``mail_root``, if one does (and it can be read)."""
    try:
        text = StateDir.of(mail_root).project.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return Path(text) if text else None


def used(mail_root: Path) -> bool:
    """Whether anything was ever kept in ``mail_root`` (mail or state)."""
    try:
        return any(mail_root.iterdir())
    except OSError:
        return False


def claim(mail_root: Path, project_dir: Path) -> None:
    """Record ``project_dir`` as the owner of ``mail_root`` unless one is recorded already
    (created whole, once: of two projects claiming at once, one wins and the other is refused)."""
    if owner(mail_root) is not None:  # the common case, every command: a read, no write
        check_owner(mail_root, project_dir)
        return
    path = StateDir.of(mail_root).project
    try:
        private_dirs(path.parent)  # the mail root and its state directory: the owner's only
        tmp = path.with_name(f".project.{os.getpid()}.tmp")
        tmp.write_text(f"{project_dir}\n", encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:
        return  # a root we cannot write (a read-only view): nothing to claim, nothing lost
    check_owner(mail_root, project_dir)


def check_owner(mail_root: Path, project_dir: Path) -> None:
    """Refuse, in one line, a mail root another project owns."""
    other = owner(mail_root)
    if other is not None and other.resolve() != project_dir.resolve():
        raise ConfigError(
            f"mail root {mail_root} belongs to the project in {other}, not this one ({project_dir}): "
            f"set [workflow] mail_root in {project_dir / 'workflow.toml'} (workflow init gives a new project its own)"
        )


def check(config: Config) -> None:
    """Before a command: a project there is, and the mail root is its own (claimed if unowned)."""
    if config.path is None:
        raise ConfigError(
            f"no workflow.toml in {config.project_dir} or above: make a project with `workflow init`, "
            "or name one with --config FILE or $WORKFLOW_CONFIG"
        )
    claim(config.mail_root, config.project_dir)


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s[:40] or "project"


def shown(path: Path) -> str:
    """``path`` with the home directory as ``~`` (how workflow.toml says it)."""
    home = Path.home()
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def choose(project_dir: Path) -> tuple[Path, str]:
    """(mail root, why) for a new project: the default root when nobody owns or used it (or
    this project owns it), else ``~/.maildir/workflow-NAME``, made unique."""
    default = Path(DEFAULT).expanduser()
    mine = owner(default)
    if (mine is None and not used(default)) or (mine is not None and mine.resolve() == project_dir.resolve()):
        return default, "the default mail root"
    why = f"{shown(default)} belongs to {mine}" if mine is not None else f"{shown(default)} is in use"
    base = default.with_name(f"{default.name}-{slug(project_dir.name)}")
    candidate, n = base, 2
    while True:
        o = owner(candidate)
        if (o is None and not used(candidate)) or (o is not None and o.resolve() == project_dir.resolve()):
            return candidate, f"its own mail root ({why})"
        candidate, n = base.with_name(f"{base.name}-{n}"), n + 1
