"""Styled: tables and colour on a terminal (rich) — the board, the inbox, the doctor; plain text when piped.

``wanted`` says whether to style: stdout is a terminal and neither ``NO_COLOR`` nor
``TERM=dumb`` says otherwise. Piped output stays the plain text scripts and tests read.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workflow.core.words import count

if TYPE_CHECKING:
    from workflow.artifacts.board import Card
    from workflow.core.config import Config

STATE_STYLE = {"proposed": "yellow", "todo": "cyan", "doing": "blue", "blocked": "bold red", "done": "green"}


def wanted() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


EVENT_STYLE = {
    "blocker-report": "bold red",
    "rejection": "red",
    "review-request": "yellow",
    "clarification-request": "magenta",
    "question": "magenta",
    "approval": "green",
    "answer": "cyan",
    "status-update": "dim",
}


def text(plain: str, kind: str) -> None:
    """Plain output, coloured: the inbox (thread subjects bold, events by kind, ids dim) or the
    doctor's problems (the check in red). One renderer makes the text; this only colours it."""
    from rich.console import Console  # lazy: only a terminal pays for rich
    from rich.text import Text

    t = Text(plain.rstrip("\n"))
    if kind == "inbox":
        t.highlight_regex(r"(?m)^▸ .*$", "bold")
        t.highlight_regex(r"<[^<>\s]+@[^<>\s]+>", "dim")
        for event, style in EVENT_STYLE.items():
            t.highlight_regex(rf"\b{event}\b", style)
    elif kind == "doctor":
        t.highlight_regex(r"(?m)^[a-z-]+:", "bold red")
        t.highlight_regex(r"\[--fix: [^\]]*\]", "green")
    Console(highlight=False).print(t)


def board(config: Config, cards: Sequence[Card]) -> None:
    """The board as one table: state, artifact, the last mail about it, its age, what is wrong."""
    from rich.console import Console  # lazy: only a terminal pays for rich
    from rich.table import Table

    from workflow.artifacts.board import age  # lazy: the inbox's start-up does not need the board

    now = time.time()
    table = Table(title="workflow status", title_justify="left", show_lines=False)
    for name, justify in (
        ("state", "left"),
        ("artifact", "left"),
        ("last mail", "left"),
        ("age", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for state in config.states:
        here = [c for c in cards if c.artifact.state == state]
        style = STATE_STYLE.get(state, "")
        if not here:
            table.add_row(f"[{style}]{state}/[/]" if style else f"{state}/", "[dim]-[/]", "", "", "")
        for c in here:
            last = c.last
            said = f"{last.event or 'mail'} from {last.sender.split('@')[0]}" if last else "[dim]no mail yet[/]"
            flags = f"[bold red]! {'; '.join(c.flags)}[/]" if c.flags else ""
            table.add_row(
                f"[{style}]{state}/[/]" if style else f"{state}/",
                c.artifact.path,
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
