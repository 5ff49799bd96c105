"""Outside: mail imported from outside cannot pose as a role or as workflow mail.

An outside sender writes whatever headers it likes: ``From: spec-reviewer@workflow.local`` and
``X-Event-Type: approval`` would otherwise be stored as they came, and every reader (the inbox,
the board, a role's prompt) would show "approval from spec-reviewer". Before an imported
message is stored, every workflow header it carries (``X-Event-Type``, ``X-Workflow-State``,
``X-Artifacts``, ``X-Next-Roles``, any ``X-Workflow-*`` and ``X-Bridge*``) is renamed
``X-Original-…``, and a ``From:`` or ``Sender:`` in the workflow's own domain is rewritten to
the bridge's account (the original kept as ``X-Original-From``), so it reads as outside mail.
The body is never touched.
"""

from __future__ import annotations

import re

from workflow.mail.message import split_head

WORKFLOW_HEADER = re.compile(
    rb"^(x-event-type|x-workflow-[\w-]*|x-artifacts|x-next-roles|x-bridge[\w-]*)$", re.IGNORECASE
)
ADDRESS = re.compile(rb"[\w.+-]+@([\w-]+(?:\.[\w-]+)*)")


def _fields(head: bytes) -> list[list[bytes]]:
    """The header block as fields, each a list of its physical lines (continuations folded in)."""
    fields: list[list[bytes]] = []
    for line in head.split(b"\n"):
        line = line.rstrip(b"\r")
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        elif line:
            fields.append([line])
    return fields


def _ours(value: bytes, domain: str) -> bool:
    want = domain.lower().encode()
    return any(m.group(1).lower() == want or m.group(1).lower().endswith(b"." + want) for m in ADDRESS.finditer(value))


def as_outside(raw: bytes, domain: str, account: str) -> bytes:
    """``raw`` with its workflow headers renamed and an in-domain From/Sender rewritten to ``account``."""
    head, offset = split_head(raw)
    out: list[bytes] = []
    for field in _fields(head):
        name, _, rest = field[0].partition(b":")
        key = name.strip()
        value = b" ".join([rest.strip(), *(ln.strip() for ln in field[1:])])
        if WORKFLOW_HEADER.match(key):
            out.append(b"X-Original-" + key + b": " + value)
        elif key.lower() in (b"from", b"sender") and _ours(value, domain):
            out.append(b"X-Original-" + key + b": " + value)
            shown = re.sub(rb"[\"\\<>\r\n]", b"", value)[:200]
            out.append(key + b': "' + shown + b' (outside)" <' + account.encode() + b">")
        else:
            out.extend(field)
    return b"\r\n".join(out) + b"\r\n\r\n" + raw[offset:]
