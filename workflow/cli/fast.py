"""Fast: the short reading commands — ``inbox``, ``thread``, ``search`` — declared once, and run
without click when they can be.

Each command's parameters are declared here as data (``Spec``); the click commands are built
from the same declarations (``cli.base.params``), and both run the same bodies (``inbox_text``,
``thread_text``, ``search_text``). ``run`` is the fast path: it parses the arguments itself, finds
the project's snapshot (``core.snapshot``), opens the index read-only and answers — unless
anything is unusual (``--help``, an option it does not know, an unknown role or filter value,
``--json``, a colour terminal's rich tables, mail not yet indexed, no current snapshot, a run's
agent): then it returns None and the full command runs, says what is wrong, and saves a new
snapshot. So the fast path never decides anything the full command would decide differently.
Start-up time is the point: this module and what it imports stay free of click, ``typing``,
``pathlib``, ``re``, ``tomllib`` and ``email`` (docs/performance.md).
"""

from __future__ import annotations

import os
import sys

from workflow.cli import styled
from workflow.core import snapshot
from workflow.core.errors import WorkflowError
from workflow.core.locate import Resolver
from workflow.mail.ids import given_msgid
from workflow.mail.inbox import group, render_inbox, render_thread, select, thread_rows
from workflow.mail.maildir import mailboxes_in
from workflow.mail.reader import Reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import NamedTuple

    from workflow.mail.rows import Row
else:
    from workflow.core.records import NamedTuple


class Param(NamedTuple):
    """One parameter: an argument (``decl`` is its name) or an option (``decl`` is ``--name``)."""

    decl: str
    dest: str
    kind: str  # "arg", "value" (an option with a value) or "flag"
    help: str = ""
    metavar: str | None = None
    default: str | int | bool | None = None
    required: bool = False
    integer: bool = False
    show_default: bool = False


class Spec(NamedTuple):
    name: str
    params: tuple[Param, ...]

    @property
    def options(self) -> dict[str, Param]:
        return {p.decl: p for p in self.params if p.kind != "arg"}

    @property
    def arguments(self) -> list[Param]:
        return [p for p in self.params if p.kind == "arg"]


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
SPECS = {s.name: s for s in (INBOX, THREAD, SEARCH)}


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
        else:
            values[p.dest] = given
    wanted = spec.arguments
    if len(args) != len(wanted):
        return None
    for p, v in zip(wanted, args, strict=True):
        values[p.dest] = v
    if any(p.required and values[p.dest] is None for p in spec.params):
        return None
    return values


class Known:
    """A project as its snapshot knows it (the names ``core.locate`` reads, and the views)."""

    def __init__(self, facts: Mapping[str, object]) -> None:
        self.mail_root = str(facts["mail_root"])
        self.index_path = str(facts["index_path"])
        self.domain = str(facts["domain"])
        self.project_dir = str(facts["project_dir"])
        self.states = tuple(str(s) for s in facts["states"])  # type: ignore[attr-defined]
        self.event_types = tuple(str(s) for s in facts["event_types"])  # type: ignore[attr-defined]
        self.artifact_roots = tuple(str(s) for s in facts["artifact_roots"])  # type: ignore[attr-defined]
        self.views: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = facts["views"]  # type: ignore[assignment]


# ---------------------------------------------------------------- the bodies, shared with the click commands


def inbox_text(
    index: Reader,
    boxes: Sequence[str],
    role: str,
    where: Resolver,
    *,
    event: str | None,
    artifact: str | None,
    state: str | None,
    show_all: bool,
    states: Sequence[str],
    coloured: bool,
) -> str:
    """``workflow inbox``'s text (the index refreshed for ``boxes`` by the caller)."""
    rows = select(index, boxes, unread=not show_all, event=event, state=state, artifact=artifact, states=states)
    text = render_inbox(role, group(rows), not show_all, where.now)
    return styled.inbox(text) + "\n" if coloured else text


def thread_text(index: Reader, view: tuple[Sequence[str], Sequence[str]], mid: str, mail_root: str) -> str | None:
    """``workflow thread``'s transcript; None when the message is not in the viewer's mail."""
    boxes, sent = view
    rows = thread_rows(index, boxes, mid, sent)
    return render_thread(rows, mail_root, boxes) if rows else None


def search_lines(rows: Sequence[Row]) -> tuple[str, str]:
    """``workflow search``'s results (stdout) and their count (stderr)."""
    out = "".join(f"{r.mailbox:<28} {r.event or 'mail':<21} {r.subject}\n{'':<28} {r.message_id}\n" for r in rows)
    return out, f"{len(rows)} result{'' if len(rows) == 1 else 's'}\n"


# ---------------------------------------------------------------- the fast path


def run(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run ``workflow ARGV`` on the fast path and return its exit code; None when the full
    command must run instead (it then decides everything, errors included)."""
    if env.get("WORKFLOW_RUN"):
        return None  # inside a run: the run's own rules (cli.runs)
    config: str | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # root options before the command: --config only
        name, eq, given = argv[i].partition("=")
        if name != CONFIG.decl or (not eq and i + 1 >= len(argv)):
            return None
        config, i = (given, i + 1) if eq else (argv[i + 1], i + 2)
    spec = SPECS.get(argv[i]) if i < len(argv) else None
    kw = parse(spec, argv[i + 1 :]) if spec is not None else None
    if spec is None or kw is None or kw.pop("as_json"):
        return None
    config = str(kw.pop(CONFIG.dest) or config or "") or None
    path = snapshot.config_path(config, env)
    facts = snapshot.load(path, env) if path is not None else None
    if facts is None:
        return None
    try:
        known = Known(facts)
    except (KeyError, TypeError, AttributeError):
        return None
    reader = Reader.open(known.index_path)
    if reader is None:
        return None
    with reader:
        try:
            return COMMANDS[spec.name](known, reader, kw)
        except WorkflowError:
            return None  # the full command says it


def _current(reader: Reader, known: Known, boxes: Sequence[str]) -> bool:
    """Whether the index holds everything in these mailboxes (else the full command refreshes it)."""
    return not reader.changed((b, os.path.join(known.mail_root, b)) for b in boxes)


def _inbox(known: Known, reader: Reader, kw: dict[str, object]) -> int | None:
    role, event, state = str(kw["role"]), _text(kw["event"]), _text(kw["state"])
    view = known.views.get(role)
    if view is None or (event is not None and event not in known.event_types):
        return None
    if (state is not None and state not in known.states) or not _current(reader, known, view[0]):
        return None
    text = inbox_text(
        reader,
        view[0],
        role,
        Resolver(known),
        event=event,
        artifact=_text(kw["artifact"]),
        state=state,
        show_all=bool(kw["show_all"]),
        states=known.states,
        coloured=styled.wanted(),
    )
    return _write(text)


def _thread(known: Known, reader: Reader, kw: dict[str, object]) -> int | None:
    view = known.views.get(str(kw["as_role"]))
    mid = given_msgid(str(kw["message_id"]))
    if view is None or mid is None:
        return None  # the full command says what is wrong
    if not _current(reader, known, mailboxes_in(known.mail_root)):
        return None
    text = thread_text(reader, view, mid, known.mail_root)
    return None if text is None else _write(text)


def _search(known: Known, reader: Reader, kw: dict[str, object]) -> int | None:
    as_role = kw["as_role"]
    view = known.views.get(str(as_role)) if as_role is not None else (None, ())
    if view is None or not _current(reader, known, mailboxes_in(known.mail_root)):
        return None
    text, count = search_lines(reader.search(str(kw["text"]), view[0], int(kw["limit"]), view[1]))  # type: ignore[call-overload]
    code = _write(text)
    sys.stderr.write(count)
    return code


COMMANDS: dict[str, Callable[[Known, Reader, dict[str, object]], int | None]] = {
    "inbox": _inbox,
    "thread": _thread,
    "search": _search,
}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `workflow inbox | head`: the reader has all it wanted
        pass
    return 0
