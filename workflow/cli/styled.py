"""Styled: tables and colour on a terminal — the board, the inbox, the doctor; plain text when piped.

``wanted`` says whether to style: stdout is a terminal and neither ``NO_COLOR`` nor
``TERM=dumb`` says otherwise. Piped output stays the plain text scripts and tests read. The
board and the doctor are drawn by rich; the inbox, a short command that must start fast, is
coloured here with plain ANSI codes (rich alone would take twice its start-up budget).
"""

from __future__ import annotations

import os
import sys
import time

from workflow.core import events
from workflow.core.senders import who
from workflow.core.words import count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from workflow.artifacts.board import Card
    from workflow.core.config import Config

STATE_STYLE = {"proposed": "yellow", "todo": "cyan", "doing": "blue", "blocked": "bold red", "done": "green"}


def wanted() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


ANSI = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def ansi(text: str, style: str) -> str:
    """``text`` in a rich-style ``style`` ("bold red") as ANSI escape codes."""
    codes = ";".join(ANSI[w] for w in style.split() if w in ANSI)
    return f"\x1b[{codes}m{text}\x1b[0m" if codes else text


def inbox(plain: str) -> str:
    """The inbox's text (``mail.inbox.render_inbox``) coloured: thread subjects bold, each
    message's event by kind, Message-IDs dim. One renderer makes the text; this only colours it."""
    out = []
    for line in plain.split("\n"):
        if line.startswith("▸ "):
            line = ansi(line, "bold")
        elif line.startswith("      <") and line.endswith(">"):
            line = "      " + ansi(line[6:], "dim")
        elif line.startswith("  ") and len(line) > 22 and line[2] in " N":
            head, rest = line[:22], line[22:]  # "  N YYYY-MM-DD HH:MM  " then the event
            event = rest.split(" ", 1)[0]
            style = events.get(event).style
            if style:
                line = head + ansi(event, style) + rest[len(event) :]
        out.append(line)
    return "\n".join(out)


def text(plain: str, kind: str) -> None:
    """Plain output, coloured: the doctor's problems (the check in red). One renderer makes the
    text; this only colours it."""
    from rich.console import Console  # lazy: only a terminal pays for rich
    from rich.text import Text

    t = Text(plain.rstrip("\n"))
    if kind == "doctor":
        t.highlight_regex(r"(?m)^[a-z-]+:", "bold red")
        t.highlight_regex(r"\[--fix: [^\]]*\]", "green")
    Console(highlight=False).print(t)


def board(config: Config, cards: Sequence[Card]) -> None:
    """The board as one table: state, artifact, the role whose commit put it there and when, the last
    mail about it, its age, what is wrong."""
    from rich.console import Console  # lazy: only a terminal pays for rich
    from rich.table import Table

    from workflow.artifacts.board import age  # lazy: the inbox's start-up does not need the board

    now = time.time()
    table = Table(title="workflow status", title_justify="left", show_lines=False)
    for name, justify in (
        ("state", "left"),
        ("artifact", "left"),
        ("moved by", "left"),
        ("last mail", "left"),
        ("age", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for state in config.states:
        here = [c for c in cards if c.artifact.state == state]
        style = STATE_STYLE.get(state, "")
        if not here:
            table.add_row(f"[{style}]{state}/[/]" if style else f"{state}/", "[dim]-[/]", "", "", "", "")
        for c in here:
            last = c.last
            said = f"{last.event or 'mail'} from {who(last.sender, config.domain)}" if last else "[dim]no mail yet[/]"
            flags = f"[bold red]! {'; '.join(c.flags)}[/]" if c.flags else ""
            table.add_row(
                f"[{style}]{state}/[/]" if style else f"{state}/",
                c.artifact.path,
                f"{c.moved.role}, {age(c.moved.time, now)}" if c.moved else "[dim]-[/]",
                said,
                age(last.date, now) if last else "-",
                flags,
            )
    flagged = sum(1 for c in cards if c.flags)
    console = Console()
    console.print(table)
    console.print(
        f"{count(len(cards), 'artifact')}, "
        + (f"[bold red]{flagged} flagged[/] (workflow doctor explains)" if flagged else "0 flagged")
    )
