"""Outside: mail imported from outside cannot pose as a role or as workflow mail.

An outside sender writes whatever headers it likes: ``From: spec-reviewer@workflow.local`` and
``X-Event-Type: approval`` would otherwise be stored as they came, and every reader (the inbox,
the board, a role's prompt, agentd reading people's decisions) would take it as "approval from
spec-reviewer". Before an imported message is stored:

* every workflow header it carries (``X-Event-Type``, ``X-Workflow-State``, ``X-Artifacts``,
  ``X-Next-Roles``, any ``X-Workflow-*``, and the bridges' own mark ``X-Bridge*``,
  ``mail.imported``) is renamed ``X-Original-…``;
* every header that says who sent it or who answers it (``From``, ``Sender``, ``Reply-To``,
  every ``Resent-*`` and the like: ``IDENTITY``) is judged as the readers judge it — decoded and
  unfolded by ``mail.message.parse``, its addresses taken by ``mail.message.mailboxes``, which
  drops comments, whitespace and quoting as RFC 5322 does — and when any address the readers
  would find in it is in the workflow's domain (or below it), it is renamed ``X-Original-…``;
  a ``From`` or ``Sender`` is replaced by the bridge's account, named ``"… (outside)"``.
  ``spec-reviewer(x)@workflow.local``, ``spec-reviewer @workflow.local``,
  ``spec-reviewer@workflow(x).local`` and every other spelling of a role's address are caught by
  the one parser that would read them, not by a pattern of what an address looks like.

Each header's name is found as the readers find it (``mail.message.field_name``: only spaces and
tabs around it go — ``From\\x1c`` is no ``From`` to the bridge because it is none to the readers),
and a name that is not RFC 5322 ftext (printable ASCII but the colon: ``HEADER_NAME_RE``) is never
stored as a live header: the field becomes ``X-Original-Malformed:``, its name escaped into its
value, so that no reader — ours, Dovecot's, a person's mail client — takes it for another. A bare
CR inside the header block (a line break to the email package and to some clients, to ours none)
becomes a space.

Recipients (To, Cc) are left as they came: they name no sender. The body is never touched.
"""

from __future__ import annotations

import re

from workflow.mail.imported import PREFIX
from workflow.mail.message import HEADER_NAME_RE, field_name, mailboxes, parse, split_head

WORKFLOW_HEADER = re.compile(rb"^(x-event-type|x-workflow-[\w-]*|x-artifacts|x-next-roles)$", re.IGNORECASE)
IDENTITY = frozenset(
    {
        "from",
        "sender",
        "reply-to",
        "mail-reply-to",
        "mail-followup-to",
        "return-path",
        "errors-to",
        "disposition-notification-to",
        "return-receipt-to",
    }
)
MALFORMED = b"X-Original-Malformed"  # what a field whose name is not ftext becomes
REPLACED = ("from", "sender")  # renamed, and written again as the bridge's account
SHOWN_DROP = re.compile(r"[^\x20-\x7e]|[\"\\<>=]")  # what a display name must not carry


def _fields(head: bytes) -> list[list[bytes]]:
    """The header block as fields, each a list of its physical lines (continuations folded in)."""
    fields: list[list[bytes]] = []
    for line in head.split(b"\n"):
        line = line.rstrip(b"\r").replace(b"\r", b" ")  # a bare CR: a line break to some readers, to ours none
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        elif line:
            fields.append([line])
    return fields


def _identity(name: str) -> bool:
    return name in IDENTITY or name.startswith("resent-")


def _decoded(field: list[bytes]) -> str:
    """The field's value as the readers see it (unfolded, RFC 2047 decoded: ``mail.message.parse``)."""
    parsed = parse(b"\n".join(field) + b"\n\n")
    return parsed.headers[0][1] if parsed.headers else ""


def ours(value: str, domain: str) -> bool:
    """Whether the readers would find an address of ``domain`` (or below it) in a decoded value:
    any mailbox ``mailboxes`` finds in it, or the whole value, as ``Parsed.sender`` falls back to."""
    want = domain.lower().strip(".")
    try:
        found = [*mailboxes(value), value.strip().lower()]
    except Exception:  # a value the email package cannot take apart: judged ours, never trusted
        return True
    for address in found:
        if "@" not in address:
            continue
        host = address.rpartition("@")[2].strip().strip('"[]').strip(".").lower()
        host = "".join(host.split())
        if host == want or host.endswith("." + want):
            return True
    return False


def _shown(value: str) -> bytes:
    """A display name naming what the sender wrote, which no reader can take for an address."""
    return SHOWN_DROP.sub("", value).strip()[:200].encode("ascii")


def _escaped(name: bytes) -> bytes:
    """A field name fit for a header value: every byte but printable ASCII as ``\\xNN``."""
    return b"".join(bytes([c]) if 0x20 < c < 0x7F else b"\\x%02x" % c for c in name)


def as_outside(raw: bytes, domain: str, account: str) -> bytes:
    """``raw`` with its workflow headers renamed, and every sender header that the readers would
    take for an address of ``domain`` renamed (a From/Sender rewritten to ``account``)."""
    head, offset = split_head(raw)
    out: list[bytes] = []
    for field in _fields(head):
        name, colon, rest = field[0].partition(b":")
        text = field_name(name.decode("utf-8", "replace"))  # as mail.message.parse finds it
        key = text.encode("ascii", "replace")
        lower = text.lower()
        value = b" ".join([rest.strip(), *(ln.strip() for ln in field[1:])])
        if colon and not HEADER_NAME_RE.match(text):
            out.append(MALFORMED + b": " + _escaped(name) + b": " + value)
        elif WORKFLOW_HEADER.match(key) or lower.startswith(PREFIX):
            out.append(b"X-Original-" + key + b": " + value)
        elif _identity(lower) and ours(_decoded(field), domain):
            out.append(b"X-Original-" + key + b": " + value)
            if lower in REPLACED:
                out.append(key + b': "' + _shown(_decoded(field)) + b' (outside)" <' + account.encode() + b">")
        else:
            out.extend(field)
    return b"\r\n".join(out) + b"\r\n\r\n" + raw[offset:]
