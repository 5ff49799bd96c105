"""Fast: the short commands — ``inbox``, ``thread``, ``search``, ``notify`` — declared once, and run
without click when they can be.

Each command's parameters are declared here as data (``Spec``); the click commands are built
from the same declarations (``cli.base.params``). ``run`` is the fast path: it parses the
arguments itself, finds the project's config as the full command does (``core.configfile``) and
loads its snapshot (``core.snapshot``); a reading command is then
answered from the index by the bodies the click commands use too (``cli.reading``), and a
notification is handed to the running server, which composes and delivers it as the command
would (``delivery.submit``). Anything unusual (``--help``, an option it does not know, an unknown
role or filter value, ``--json``, ``--stdout``, mail not yet indexed, no current snapshot, no
server, a run's agent) makes it return None: the full command runs, says what is wrong, and saves
a new snapshot. So the fast path never decides anything the full command would decide
differently. Start-up time is the point: this module and what it imports stay free of click,
``typing``, ``pathlib``, ``re``, ``tomllib`` and ``email`` (docs/performance.md).
"""

from __future__ import annotations

import sys

from workflow.cli.say import text_or_none, write
from workflow.core import configfile, snapshot
from workflow.core.errors import ToolError, TransportError, WorkflowError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NamedTuple

    from workflow.core.snapshot import Facts
else:
    from workflow.core.records import NamedTuple


class Param(NamedTuple):
    """One parameter: an argument (``decl`` is its name) or an option (``decl`` is ``--name``)."""

    decl: str
    dest: str
    kind: str  # "arg", "rest" (every argument left), "value" (an option with a value) or "flag"
    help: str = ""
    metavar: str | None = None
    default: str | int | bool | tuple[str, ...] | None = None
    required: bool = False
    integer: bool = False
    show_default: bool = False
    choices: tuple[str, ...] = ()


class Spec(NamedTuple):
    name: str
    params: tuple[Param, ...]

    @property
    def options(self) -> dict[str, Param]:
        return {p.decl: p for p in self.params if p.kind != "arg"}

    @property
    def arguments(self) -> list[Param]:
        return [p for p in self.params if p.kind == "arg"]

    @property
    def rest(self) -> Param | None:
        return next((p for p in self.params if p.kind == "rest"), None)


JSON = Param("--json", "as_json", "flag", "Machine-readable output.", default=False)
CONFIG = Param("--config", "config_path", "value")  # the root option, also accepted after the command

INBOX = Spec(
    "inbox",
    (
        Param("role", "role", "arg"),
        Param("--event", "event", "value", "Only this X-Event-Type."),
        Param("--artifact", "artifact", "value", "Only mail whose X-Artifacts match (glob or part of a name).", "GLOB"),
        Param("--state", "state", "value", "Only this X-Workflow-State."),
        Param("--all", "show_all", "flag", "Read mail too, not only unread.", default=False),
        JSON,
    ),
)
THREAD = Spec(
    "thread",
    (
        Param("message_id", "message_id", "arg"),
        Param("--as", "as_role", "value", "Show only what ROLE may see.", "ROLE", required=True),
        JSON,
    ),
)
SEARCH = Spec(
    "search",
    (
        Param("text", "text", "arg"),
        Param("--as", "as_role", "value", "Search only what ROLE may see (default: every mailbox).", "ROLE"),
        Param("--limit", "limit", "value", "Most results to show.", default=50, integer=True, show_default=True),
        JSON,
    ),
)
VIA = Param(
    "--via",
    "via",
    "value",
    "auto: the SMTP server when it answers, else direct delivery (through the same checks).",
    default="auto",
    show_default=True,
    choices=("auto", "smtp", "direct"),  # how a message is sent (delivery.transport.make_transport)
)
NOTIFY = Spec(
    "notify",
    (
        Param("--in-reply-to", "in_reply_to", "value", "Message-ID this replies to (threads it).", "ID"),
        Param("--from", "sender", "value", "Sending role (default $WORKFLOW_ROLE, then 'user').", "ROLE"),
        Param("--stdout", "stdout", "flag", "Print the message instead of sending it.", default=False),
        VIA,
        Param("event", "event", "arg"),
        Param("artifact", "artifact", "arg"),
        Param("to", "to", "arg"),
        Param("pairs", "pairs", "rest", metavar="[KEY=VALUE]...", default=()),
    ),
)
TOOLS = Param("--tools", "tools", "value", "The run's tool server (default: $WORKFLOW_TOOLS).", "SOCKET")
MCP = Spec("mcp", (TOOLS,))  # an agent CLI's tool server, started at every run (agents.mcpserver)
SPECS = {s.name: s for s in (INBOX, THREAD, SEARCH, NOTIFY)}


def parse(spec: Spec, argv: Sequence[str]) -> dict[str, object] | None:
    """The values ``argv`` gives ``spec``'s parameters, as click would parse them; None for
    anything click would answer itself (help, an unknown or malformed option, missing values)."""
    values: dict[str, object] = {p.dest: p.default for p in spec.params}
    values[CONFIG.dest] = None
    options = {**spec.options, CONFIG.decl: CONFIG}
    args: list[str] = []
    only_args = False
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if only_args or a == "-" or not a.startswith("-"):
            args.append(a)
            continue
        if a == "--":
            only_args = True
            continue
        name, eq, given = a.partition("=")
        p = options.get(name)
        if p is None:
            return None
        if p.kind == "flag":
            if eq:
                return None
            values[p.dest] = True
            continue
        if not eq:
            if i >= len(argv):
                return None
            given = argv[i]
            i += 1
        if p.integer:
            try:
                values[p.dest] = int(given.strip())
            except ValueError:
                return None
        elif p.choices and given not in p.choices:
            return None
        else:
            values[p.dest] = given
    wanted, rest = spec.arguments, spec.rest
    if len(args) < len(wanted) or (rest is None and len(args) > len(wanted)):
        return None
    for p, v in zip(wanted, args, strict=False):
        values[p.dest] = v
    if rest is not None:
        values[rest.dest] = tuple(args[len(wanted) :])
    if any(p.required and values[p.dest] is None for p in spec.params):
        return None
    return values


def run(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run ``workflow ARGV`` on the fast path and return its exit code; None when the full
    command must run instead (it then decides everything, errors included)."""
    if argv[:1] == [MCP.name]:
        return _mcp(argv[1:], env)
    if env.get("WORKFLOW_RUN"):
        return None  # inside a run: the run's own rules (cli.runs)
    config: str | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # root options before the command: --config only
        name, eq, given = argv[i].partition("=")
        if name != CONFIG.decl or (not eq and i + 1 >= len(argv)):
            return None
        config, i = (given, i + 1) if eq else (argv[i + 1], i + 2)
    if argv[i : i + 2] == ["hooks", "run"]:
        from workflow.cli import hookrun  # lazy: git's hooks, on every commit

        return hookrun.answer(argv[i + 2 :], config, env)
    spec = SPECS.get(argv[i]) if i < len(argv) else None
    kw = parse(spec, argv[i + 1 :]) if spec is not None else None
    if spec is None or kw is None or kw.pop("as_json", False):
        return None
    config = str(kw.pop(CONFIG.dest) or config or "") or None
    try:
        path = configfile.lookup(config, env)  # the full command's own lookup
    except WorkflowError:
        return None  # the full command says what is wrong with it
    known = snapshot.load(path, env) if path is not None else None
    if known is None:
        return None
    if spec is NOTIFY:
        return _notify(known, kw, env)
    from workflow.cli import reading  # lazy: the index and the renderers, which notify does not need

    return reading.answer(spec.name, known, kw)


def _mcp(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """``workflow mcp``: an agent CLI waits for its tool list, so it is served without click."""
    kw = parse(MCP, argv)
    path = str(kw["tools"] or env.get("WORKFLOW_TOOLS") or "") if kw is not None else ""
    if kw is None or kw[CONFIG.dest] is not None or not path:
        return None  # help, an unknown option, no socket: the full command says what is wrong
    from workflow.agents import mcpserver  # lazy: only this command serves MCP

    try:
        mcpserver.serve(path)
    except OSError as e:
        sys.stderr.write(f"Error: {mcpserver.no_run(path, e)}\n")
        return ToolError.exit_code
    return 0


def _notify(known: Facts, kw: dict[str, object], env: Mapping[str, str]) -> int | None:
    """workflow-notify through the running server, which composes the message (delivery.submit)."""
    if kw["stdout"] or kw["via"] == "direct" or env.get("WORKFLOW_TOKEN") or env.get("WORKFLOW_NO_CREDENTIAL"):
        return None
    # lazy: the socket and the owner's file, which the reading commands do not need
    from workflow.delivery import owner, submit, xnotify

    try:
        secret = owner.read(owner.path(env))  # the full command's own check
    except WorkflowError:
        return None  # the full command makes it, or says what is wrong with it
    req = xnotify.Request(
        event=str(kw["event"]),
        artifact=str(kw["artifact"]),
        to=str(kw["to"]),
        sender=text_or_none(kw["sender"]) or env.get("WORKFLOW_ROLE") or known.default_sender,
        in_reply_to=text_or_none(kw["in_reply_to"]) or "",
        pairs=tuple(str(p) for p in kw["pairs"]),  # type: ignore[attr-defined]
    )
    try:
        mid, recipients = submit.submit(known.socket, known.timeout, known.login, secret, req)
    except submit.RefusedError:
        return None  # nothing was delivered: the full command composes it and says why not, or delivers directly
    except submit.UnsureError as e:
        sys.stderr.write(f"Error: sent to {known.socket} but no answer came ({e}); it may have been delivered\n")
        return TransportError.exit_code
    code = write(mid + "\n")
    sys.stderr.write(f"sent {req.event} to {', '.join(recipients)} (smtp: {known.socket})\n")
    return code
