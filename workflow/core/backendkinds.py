"""Backend kinds: every backend a run can use, declared once — its name, whether it runs a process
(an agent CLI on this machine), its model API, its one-line description, and for an agent CLI its
``Cli`` record: everything about that CLI that is data (its command, its state folder and the
variable naming it, its credentials and login hint, the folders of the tree it obeys).

The config validator, the role front matter, ``--backend``, doctor, the scaffold's text, ``workflow
backends``, the login check, the model-API probe, the default ``[runs] env`` and the agent-files
guard (``artifacts.agentfiles``) read this tuple; ``agents.backends`` maps each name to how it is
made, and ``agents.backends.profiles`` gives each ``Cli`` its behaviour (argv, report). No other
module keeps a table keyed by a CLI's name (a test checks it). Adding a backend: one ``Kind`` here,
one maker there; an agent CLI: one ``Kind`` with its ``Cli`` here, one profile there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cli:
    """An agent CLI's data. Its state lives in the role's own CLI state directory (``StateDir.cli``),
    in ``state``, named to the CLI by the variable ``state_env``; its agents are logged in when one
    of ``credentials`` reaches them (``login_hint``: how to get one); ``env``: the other variables
    its agents get by default (``[runs] env``); ``sessions``: the folder its transcripts are in;
    ``gone``: what it says (a regular expression) when asked to resume a session it does not know;
    ``folders``: its settings, skills and plugins, which
    an agent must never plant in the tree (``artifacts.agentfiles``) — forget one, and one role's
    agent steers every later run."""

    program: str  # its command on PATH
    state: str  # its subfolder of the role's CLI state directory …
    state_env: str  # … and the variable that names it to the CLI
    credentials: tuple[str, ...]
    login_hint: str
    folders: tuple[str, ...]
    sessions: str  # the folder (anywhere in its state) of its sessions' transcripts
    gone: str  # its error for a session it does not know (then a new session may take the run)
    env: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    """One backend: ``process`` — it runs a program (doctor checks the sandbox for it); ``cli`` — an
    agent CLI driven by its profile in ``agents.backends.profiles`` (``[backends.NAME]`` is a CLI
    section); ``api`` — the variable that moves its model API and the API's own address;
    ``preload`` — the modules a run of it imports that agentd's warm fork server imports once for
    every run (``agentd.launch``), where each run would pay them again."""

    name: str
    about: str
    process: bool = False
    cli: Cli | None = None
    api: tuple[str, str] = ("", "")
    preload: tuple[str, ...] = ()

    @property
    def profile(self) -> bool:
        """An agent CLI with a profile of its own."""
        return self.cli is not None

    @property
    def program(self) -> str:
        """A profile's command on PATH ("" for any other backend)."""
        return self.cli.program if self.cli is not None else ""


ANTHROPIC_API = ("ANTHROPIC_BASE_URL", "https://api.anthropic.com")

CLAUDE_CODE = Kind(
    "claude-code",
    "Claude Code (claude -p) by its profile, the role's tools over MCP",
    process=True,
    api=ANTHROPIC_API,
    cli=Cli(
        program="claude",
        state="claude",
        state_env="CLAUDE_CONFIG_DIR",
        credentials=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        login_hint="an API key, or `claude setup-token` for a subscription's CLAUDE_CODE_OAUTH_TOKEN",
        folders=(".claude", ".claude-plugin"),
        sessions="projects",
        gone=r"No conversation found with session ID",
        env=("ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"),
    ),
)
CODEX = Kind(
    "codex",
    "Codex CLI (codex exec) by its profile, the role's tools over MCP",
    process=True,
    api=("OPENAI_BASE_URL", "https://api.openai.com/v1"),
    cli=Cli(
        program="codex",
        state="codex",
        state_env="CODEX_HOME",
        credentials=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_hint="an OpenAI API key",
        folders=(".codex", ".codex-plugin"),
        sessions="sessions",
        gone=r"no rollout found for thread id",
        env=("OPENAI_BASE_URL",),
    ),
)
GEMINI = Kind(
    "gemini",
    "Gemini CLI by its profile, the role's tools over MCP",
    process=True,
    api=("GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"),
    cli=Cli(
        program="gemini",
        state="gemini",
        state_env="GEMINI_CLI_HOME",
        credentials=("GEMINI_API_KEY",),  # headless Gemini CLI takes no other key: GOOGLE_API_KEY alone is refused
        login_hint="a Gemini API key from AI Studio",
        folders=(".gemini",),  # .gemini/.env too: loaded before .env in a trusted folder
        sessions="chats",
        gone=r"Error resuming session|No previous sessions found",
        env=("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
    ),
)

KINDS = (
    Kind(
        "anthropic",
        "the Messages API with tool use (ANTHROPIC_API_KEY)",
        api=ANTHROPIC_API,
        preload=("workflow.agents.backends.anthropic_api", "anthropic"),  # the SDK: 1–2 s to import
    ),
    Kind("command", "any agent CLI with the prompt on stdin, acting by shell commands", process=True),
    Kind("scripted", "the actions listed in a TOML script (tests and the demo, no model)"),
    CLAUDE_CODE,
    CODEX,
    GEMINI,
)
BACKENDS = tuple(kind.name for kind in KINDS)
CLI_KINDS = tuple(kind for kind in KINDS if kind.cli is not None)  # the agent CLIs, each with its profile
CLIS = tuple(kind.name for kind in CLI_KINDS)  # agent CLIs with a profile of their own
PROGRAMS = {kind.name: kind.program for kind in CLI_KINDS}  # profile → its command
PROCESS = tuple(kind.name for kind in KINDS if kind.process)  # backends that run a program


def kind(name: str) -> Kind | None:
    """The backend called ``name``, or None."""
    return next((k for k in KINDS if k.name == name), None)


def cli(name: str) -> Cli | None:
    """The agent CLI called ``name``'s record, or None (no backend, or no agent CLI)."""
    found = kind(name)
    return found.cli if found is not None else None


def described(names: tuple[str, ...] = BACKENDS) -> str:
    """``"anthropic" (the Messages API …), "command" (…)`` — the choices, for help and refusals."""
    return ", ".join(f'"{k.name}" ({k.about})' for k in KINDS if k.name in names)
