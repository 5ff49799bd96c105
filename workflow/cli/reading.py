"""Reading: the short reading commands' bodies — ``inbox``, ``thread``, ``search`` — for the
fast path (``cli.fast``, from a project's snapshot) and the click commands (``cli.mail``) alike.

``answer`` runs one on the fast path: the index opened read-only, nothing refreshed; it returns
None (the full command runs) when the index is missing, damaged or behind the Maildirs, or when
a name or value is not one the snapshot knows. Start-up time: nothing heavy is imported here.
"""

from __future__ import annotations

import os
import sys

from workflow.cli import styled
from workflow.cli.say import text_or_none, write
from workflow.core.errors import WorkflowError
from workflow.core.locate import Resolver
from workflow.mail.ids import given_msgid
from workflow.mail.inbox import group, render_inbox, render_thread, select, thread_rows
from workflow.mail.maildir import mailboxes_in
from workflow.mail.reader import Reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from workflow.core.snapshot import Facts
    from workflow.mail.rows import Row


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
    domain: str,
) -> str:
    """``workflow inbox``'s text (the index refreshed for ``boxes`` by the caller)."""
    rows = select(index, boxes, unread=not show_all, event=event, state=state, artifact=artifact, states=states)
    text = render_inbox(role, group(rows), not show_all, where.now, domain=domain)
    return styled.inbox(text) + "\n" if coloured else text


def thread_text(
    index: Reader, view: tuple[Sequence[str], Sequence[str]], mid: str, mail_root: str, domain: str
) -> str | None:
    """``workflow thread``'s transcript; None when the message is not in the viewer's mail."""
    boxes, sent = view
    rows = thread_rows(index, boxes, mid, sent)
    return render_thread(rows, mail_root, boxes, domain=domain) if rows else None


def search_lines(rows: Sequence[Row]) -> tuple[str, str]:
    """``workflow search``'s results (stdout) and their count (stderr)."""
    out = "".join(f"{r.mailbox:<28} {r.event or 'mail':<21} {r.subject}\n{'':<28} {r.message_id}\n" for r in rows)
    return out, f"{len(rows)} result{'' if len(rows) == 1 else 's'}\n"


# ---------------------------------------------------------------- the fast path


def answer(name: str, known: Facts, kw: dict[str, object]) -> int | None:
    """Run the reading command ``name`` on the fast path; None when the full command must."""
    reader = Reader.open(known.index_path)
    if reader is None:
        return None
    with reader:
        try:
            return READERS[name](known, reader, kw)
        except WorkflowError:
            return None  # the full command says it


def _current(reader: Reader, known: Facts, boxes: Sequence[str]) -> bool:
    """Whether the index holds everything in these mailboxes (else the full command refreshes it)."""
    return not reader.changed((b, os.path.join(known.mail_root, b)) for b in boxes)


def _inbox(known: Facts, reader: Reader, kw: dict[str, object]) -> int | None:
    role, event, state = str(kw["role"]), text_or_none(kw["event"]), text_or_none(kw["state"])
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
        artifact=text_or_none(kw["artifact"]),
        state=state,
        show_all=bool(kw["show_all"]),
        states=known.states,
        coloured=styled.wanted(),
        domain=known.domain,
    )
    return write(text)


def _thread(known: Facts, reader: Reader, kw: dict[str, object]) -> int | None:
    view = known.views.get(str(kw["as_role"]))
    mid = given_msgid(str(kw["message_id"]))
    if view is None or mid is None:
        return None  # the full command says what is wrong
    if not _current(reader, known, mailboxes_in(known.mail_root)):
        return None
    text = thread_text(reader, view, mid, known.mail_root, known.domain)
    return None if text is None else write(text)


def _search(known: Facts, reader: Reader, kw: dict[str, object]) -> int | None:
    as_role = kw["as_role"]
    view = known.views.get(str(as_role)) if as_role is not None else (None, ())
    if view is None or not _current(reader, known, mailboxes_in(known.mail_root)):
        return None
    text, count = search_lines(reader.search(str(kw["text"]), view[0], int(kw["limit"]), view[1]))  # type: ignore[call-overload]
    code = write(text)
    sys.stderr.write(count)
    return code


READERS: dict[str, Callable[[Facts, Reader, dict[str, object]], int | None]] = {
    "inbox": _inbox,
    "thread": _thread,
    "search": _search,
}
