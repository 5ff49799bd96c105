"""Scaffold: ``workflow init`` — make a directory a workflow project, creating only what is missing.

Writes workflow.toml (unless there is one; an existing config decides the artifact roots and
states) with the project's own mail root (``core.ownership.choose``) and claims that root, a state folder with a .gitkeep for every root and state, roles/ with a README, and on
request local copies of the email templates; runs ``git init`` when the directory is not inside
a repository and installs the hooks. Running it again changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from workflow.artifacts import hooks as git_hooks
from workflow.artifacts import trust
from workflow.artifacts.gitcmd import run_git
from workflow.artifacts.gitrepo import Repo
from workflow.bridges.sections import SECTIONS
from workflow.core import modes, ownership
from workflow.core.backendkinds import BACKENDS, PROGRAMS, described
from workflow.core.config import CONFIG_NAME, DEFAULT_STATES, DEFAULT_TRANSITIONS, DOMAIN_RE, NAME_RE, load_config
from workflow.core.errors import ConfigError
from workflow.core.resources import builtin_dir
from workflow.delivery.credentials import owner_file, owner_secret
from workflow.ops.users import make_human

ROLES_README = """\
# roles/

A role here overrides the built-in role of the same name, file by file; a new file adds a role.
Format: TOML front matter between `+++` lines (mode, triggers, artifacts, backend, model, panel,
description, max_turns, moves, hands_off, host), then the role's prompt. `workflow roster` lists the roles in effect.
"""


class Step(NamedTuple):
    action: str  # "created" | "exists" | "ran" | "installed" | "up to date"
    what: str


CLI_COMMANDS = PROGRAMS  # profile → its command


def found_clis(env: Mapping[str, str]) -> list[str]:
    """The agent CLIs (their profiles' names) on PATH."""
    return [name for name, command in CLI_COMMANDS.items() if shutil.which(command, path=env.get("PATH"))]


def pick_backend(env: Mapping[str, str]) -> tuple[str, str]:
    """(backend, why) for a new project: the first agent CLI on PATH (claude, codex, gemini: each
    runs by its profile), else anthropic with a key, else none (and how to pick one)."""
    clis = found_clis(env)
    if clis:
        return clis[0], f"{CLI_COMMANDS[clis[0]]} is on PATH"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic", "ANTHROPIC_API_KEY is set"
    return "", f"none chosen: set [workflow] backend to one of {described()} before run-role or agentd"


def cli_sections(clis: Sequence[str]) -> str:
    """A ``[backends.NAME]`` table for each agent CLI found, its settings shown at their defaults."""
    out = []
    for name in clis:
        out.append(
            f"""
[backends.{name}]   # {CLI_COMMANDS[name]} on PATH: run by its profile (the role's tools by MCP, in the sandbox)
# model = ""            # "": the CLI's default; a role's or panel member's model wins
# max_turns = 0         # 0: the role's max_turns, else 20
# max_budget_usd = 0.0  # claude-code: stop a run past this cost (0: no limit)
# args = []             # more arguments for the CLI
"""
        )
    return "".join(out)


def own_port(project: Path, salt: str = "", taken: Sequence[int] = ()) -> int:
    """A loopback port of this project's own: one its path (and ``salt``: "web" for the cockpit's)
    picks in 20000–39999, the next free one from there, never one in ``taken``. Two projects never
    share a server or a cockpit by default (each serves one mail root)."""
    key = os.fsencode(project.resolve()) + salt.encode()
    start = 20000 + int(hashlib.sha256(key).hexdigest()[:8], 16) % 20000
    for port in [*range(start, 40000), *range(20000, start)]:
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(port)
    return 8025


def config_text(
    roots: Sequence[str],
    domain: str,
    mail_root: str,
    backend: str = "",
    port: int = 8025,
    clis: Sequence[str] = (),
    web_port: int = 8026,
) -> str:
    quoted = ", ".join(f'"{r}"' for r in roots)
    states = ", ".join(f'"{s}"' for s in DEFAULT_STATES)
    transitions = ",\n  ".join(f'"{t}"' for t in DEFAULT_TRANSITIONS)
    mail = f"mail_root = \"{mail_root}\"   # this project's own: another project's mail is never here"
    others = ", ".join(f'"{name}"' for name in BACKENDS if name != "claude-code")
    agents = (
        f'backend = "{backend}"   # every role\'s agent unless its roles/ file names one'
        if backend
        else f'# backend = "claude-code"   # or {others}: every role\'s agent'
    )

    return f"""\
# workflow-mail project configuration (made by `workflow init`; every key is optional).
[workflow]
domain = "{domain}"
{mail}
{agents}
artifact_roots = [{quoted}]
states = [{states}]

[smtp]
host = "127.0.0.1"
port = {port}   # this project's own: each server serves one mail root

[web]
port = {web_port}   # this project's own cockpit (`workflow web`, `workflow up --web`)

[artifacts]
# Legal moves between state folders; "*" means from any state. `workflow move` and the
# pre-commit hook refuse anything else.
transitions = [
  {transitions},
]
# What the post-commit hook sends when a commit moves an artifact (by `git mv` or otherwise):
# this event, to these roles (default: every role whose artifact globs match the new path).
commit_event = "status-update"
# commit_notify = ["coordinator"]
""" + cli_sections(clis)


def init(
    directory: Path,
    roots: Sequence[str] = (),
    domain: str = "workflow.local",
    mail_root: str | None = None,
    templates: bool = False,
    hooks: bool = True,
    env: Mapping[str, str] | None = None,
    backend: str = "",
    humans: Sequence[tuple[str, str]] = (),
) -> list[Step]:
    """Create what is missing; return what was done, step by step. ``backend`` names every role's
    agent (default: the first agent CLI on PATH); each of ``humans`` (login, role) makes that role a
    person's (``users.make_human``); its login is added by ``workflow users add``."""
    if backend and backend not in BACKENDS:
        raise ConfigError(f"--backend {backend!r}: expected one of {described()}")
    for login, role in humans:
        if not NAME_RE.match(role):
            raise ConfigError(f"--human {login}={role}: expected LOGIN=ROLE, e.g. bob=spec-reviewer")
    for r in roots:
        if not NAME_RE.match(r):
            raise ConfigError(f"--root {r!r}: expected a lower-case folder name like specs, vision or roadmap")
    if not DOMAIN_RE.match(domain):
        raise ConfigError(f"--domain {domain!r}: expected a domain like workflow.local")
    steps: list[Step] = []
    directory.mkdir(parents=True, exist_ok=True)
    toml = directory / CONFIG_NAME
    if toml.exists():
        steps.append(Step("exists", str(toml)))
    else:
        if mail_root:
            asked = Path(mail_root).expanduser()
            ownership.check_owner(asked if asked.is_absolute() else directory / asked, directory)
            why = "as asked"
        else:
            chosen, why = ownership.choose(directory)
            mail_root = ownership.shown(chosen)
        found = os.environ if env is None else env
        backend, because = (backend, "as asked") if backend else pick_backend(found)
        smtp_port = own_port(directory)
        toml.write_text(
            config_text(
                list(dict.fromkeys(roots)) or ["specs"],
                domain,
                mail_root,
                backend,
                smtp_port,
                found_clis(found),
                own_port(directory, "web", taken=[smtp_port]),
            ),
            encoding="utf-8",
        )
        steps.append(Step("created", f"{toml} (mail root {mail_root}: {why})"))
        steps.append(
            Step("chose" if backend else "note", f"backend {backend}: {because}" if backend else f"backend {because}")
        )
    config = load_config(toml, env={}, plugins=SECTIONS)
    had = ownership.owner(config.mail_root)
    ownership.claim(config.mail_root, directory)
    if had is None and ownership.owner(config.mail_root) is not None:
        steps.append(Step("claimed", f"{config.mail_root} for this project"))
    tightened = modes.secure(config.mail_root)  # an older install's mail root others could read
    if tightened:
        steps.append(Step("tightened", f"{tightened} file(s) or folder(s) under {config.mail_root}: the owner's only"))
    for root in config.artifact_roots:
        for state in config.states:
            folder = directory / root / state
            if folder.is_dir() and any(folder.iterdir()):
                continue
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".gitkeep").touch()
            steps.append(Step("created", f"{folder}/.gitkeep"))
    roles = config.roles_dir
    if not (roles / "README.md").exists():
        roles.mkdir(parents=True, exist_ok=True)
        (roles / "README.md").write_text(ROLES_README, encoding="utf-8")
        steps.append(Step("created", f"{roles}/README.md"))
    if templates:
        config.templates_dir.mkdir(parents=True, exist_ok=True)
        for src in sorted(builtin_dir("email-templates").iterdir()):
            dst = config.templates_dir / src.name
            if src.is_file() and not dst.exists():
                shutil.copyfile(src, dst)
                steps.append(Step("created", str(dst)))
    if Repo.find(config) is None:
        run_git(["init", "-q"], directory)
        steps.append(Step("ran", f"git init {directory}"))
    if hooks:
        repo = Repo(config)
        for h in git_hooks.install(config, repo):
            action, _, detail = h.action.partition(" (")
            steps.append(Step(action, f"{h.hook} hook {h.path}" + (f" ({detail}" if detail else "")))
    if not owner_file().exists():  # your credential as the mail root's owner: every command logs in with it
        owner_secret()
        steps.append(Step("created", f"{owner_file()} (your owner credential, mode 0600)"))
    for login, role in humans:
        made = make_human(config, role, f"{login} takes {role} from a mail client or the cockpit.")
        if made:
            steps.append(Step("created", f"{made} ({role} is a person's: no agent answers in {login}'s place)"))
    if trust.approved(config) is None:  # what init wrote, and what was there, as you approve it now
        count = len(trust.approve(config))
        steps.append(Step("approved", f"{count} control file(s) as they are (`workflow trust` after you change one)"))
    return steps


def next_steps(directory: Path, humans: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The three steps after ``init`` (docs/team.md tells them at length)."""
    here = "" if directory == Path.cwd() else f"cd {directory} && "
    people = humans or [("bob", "spec-reviewer")]
    logins = "; ".join(f"workflow users add {login} --role {role}" for login, role in people)
    return [
        f"{here}{logins}   # a person's login and role (a password prompt)",
        "workflow up --web   # the mail server, agentd and the cockpit",
        "workflow notify --from user feature-request specs/proposed/NAME.md spec-writer   # the first request"
        + " (docs/team.md)",
    ]
