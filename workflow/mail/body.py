"""Body: a stored message as readable text — its body and its attachments — the one place that does it.

Every reader goes through here: ``workflow read`` and ``workflow thread``, the agent's context
and its read tools, the index's full text, the panels and the Gmail bridge. The body is the
text/plain part when it says anything, else the text/html part turned into text
(``mail.htmltext``); multipart/alternative, /mixed, /related and nested parts are searched as
the email package's ``get_body`` does. Every other leaf part is an attachment: listed by number,
name, type and size; a text part (``text/*``, JSON, XML, YAML…) can be read by its number
(``part_text``), a binary one is listed and never dumped. Charsets are decoded with errors
replaced (an unknown one as UTF-8); stored mail may be anything, so nothing here raises on a
message's content — a message too deep to read says so in its text instead.

Start-up time: a plain single-part body is decoded without the ``email`` package (the common
case, on the short commands' path); anything else imports it when first needed.
"""

from __future__ import annotations

import re

from workflow.core.errors import MessageError
from workflow.mail.message import MAX_MULTIPARTS, Parsed, multiparts, no_surrogates, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from email.message import MIMEPart as Message
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

MAX_PARTS = 200  # leaf parts looked at in one message
MAX_PART_TEXT = 200_000  # characters of one attachment shown
MESSAGE_RE = re.compile(rb"(?im)^content-type:[ \t]*(?:\r?\n[ \t]+)?message/")
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
     "application/x-sh", "application/javascript", "application/sql", "application/csv", "message/rfc822"}
)  # fmt: skip
READ_ERRORS = (RecursionError, MemoryError, ValueError, LookupError, TypeError, AttributeError, IndexError, KeyError)


class Part(NamedTuple):
    """An attachment: a leaf part that is not the body."""

    number: int  # 1-based, in the message's order of parts
    name: str  # its filename, or ""
    content_type: str
    size: int  # octets, decoded
    text: bool  # readable as text (else listed only)

    def to_dict(self) -> dict[str, object]:
        """The part as ``--json`` shows it."""
        return {
            "part": self.number,
            "name": self.name,
            "content_type": self.content_type,
            "size": self.size,
            "text": self.text,
        }

    def line(self) -> str:
        name = f"{self.name} " if self.name else ""
        return f"[{self.number}] {name}({self.content_type}, {_size(self.size)}{'' if self.text else ', binary'})"


class Body(NamedTuple):
    """What a reader is shown of a message: its text and its attachments."""

    text: str
    parts: tuple[Part, ...] = ()

    def listing(self, how: str = "") -> str:
        """The attachments as lines (empty when there are none); ``how`` says how to read one,
        with ``N`` standing for its number (``workflow read MID --part N``)."""
        if not self.parts:
            return ""
        lines = [f"Attachments ({len(self.parts)}):"]
        lines += [f"  {p.line()}" for p in self.parts]
        if how and any(p.text for p in self.parts):
            lines.append(f"  Read a text attachment with {how}.")
        return "\n".join(lines) + "\n"

    def shown(self, how: str = "") -> str:
        """The text followed by the attachments' listing."""
        listing = self.listing(how)
        return self.text.rstrip("\n") + ("\n\n" + listing if listing else "\n") if self.text.strip() else listing


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MB"


def body_text(raw: bytes, parsed: Parsed | None = None) -> str:
    """The body as readable text, decoded, with LF line ends (no attachments listed)."""
    return readable(raw, parsed).text


COPY_HEADER = "X-Workflow-Copy"  # marks a part that copies an artifact (or its diff) for people


def readable(raw: bytes, parsed: Parsed | None = None, *, copies: bool = False) -> Body:
    """The message's body and attachments; never raises on what the message holds. The parts a
    notification copies an artifact into for people (``COPY_HEADER``) are left out unless
    ``copies``: an agent reads the artifact from the tree, never from a copy in the mail."""
    parsed = parsed or parse(raw)
    ctype = (parsed.get("Content-Type") or "text/plain").lower()
    cte = (parsed.get("Content-Transfer-Encoding") or "7bit").strip().lower()
    if ctype.startswith("text/plain") or not ctype.strip():
        m = re.search(r'charset="?([\w.:-]+)"?', ctype)
        return Body(_plain(raw[parsed.body_offset :], cte, m.group(1) if m else "utf-8"))
    if not copies and OURS in ctype:
        ours = _ours(raw[parsed.body_offset :], ctype)
        if ours is not None:
            return ours
    msg = _message(raw)
    if isinstance(msg, str):
        return Body(msg)
    try:
        return _readable(msg, copies)
    except READ_ERRORS as e:
        return Body(f"[body not readable: {type(e).__name__}]")


OURS = 'boundary="=_workflow_'  # the multipart a notification with the artifact's copies is (message.build)


def _ours(data: bytes, ctype: str) -> Body | None:
    """The body of a message ``message.build`` made with copies, without the email package (the
    short commands read it): its first part, when every other part is a copy; None otherwise."""
    texts = _our_parts(data, ctype)
    return Body(texts[0]) if texts is not None else None


def our_copies(raw: bytes, parsed: Parsed | None = None) -> list[str] | None:
    """The texts of the artifact's copies in a message ``message.build`` made, without the email
    package; [] when it has none, None when it is not such a message (``artparts.copies`` reads it)."""
    parsed = parsed or parse(raw)
    ctype = (parsed.get("Content-Type") or "text/plain").lower()
    if ctype.startswith("text/plain") or not ctype.strip():
        return []
    if OURS not in ctype:
        return None
    texts = _our_parts(raw[parsed.body_offset :], ctype)
    return texts[1:] if texts is not None else None


def _our_parts(data: bytes, ctype: str) -> list[str] | None:
    """Each part's text of our multipart (its body, then its copies), None when it is not one."""
    m = re.search(r'boundary="(=_workflow_[0-9a-f]+)"', ctype)
    if m is None:
        return None
    chunks = re.split(rb"\r?\n--" + re.escape(m.group(1).encode()) + rb"(?:--)?[ \t]*\r?\n", data)
    if len(chunks) < 3:
        return None
    heads = [parse(c) for c in chunks[1:-1]]
    first, rest = heads[0], heads[1:]
    if any(p.get(COPY_HEADER) is None for p in rest) or not (first.get("Content-Type") or "").startswith("text/plain"):
        return None
    out = []
    for chunk, head in zip(chunks[1:-1], heads, strict=True):
        cte = (head.get("Content-Transfer-Encoding") or "7bit").strip().lower()
        m2 = re.search(r'charset="?([\w.:-]+)"?', (head.get("Content-Type") or "").lower())
        out.append(_plain(chunk[head.body_offset :], cte, m2.group(1) if m2 else "utf-8"))
    return out


def part_text(raw: bytes, number: object, *, copies: bool = False) -> tuple[Part, str]:
    """Attachment ``number`` and its text; MessageError, naming the problem, when there is no
    such part or it is binary (numbered as ``readable`` with the same ``copies`` lists them)."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise MessageError(f"part {number!r}: expected the number of an attachment (1, 2, …)")
    msg = _message(raw)
    if isinstance(msg, str):
        raise MessageError(f"the message's parts cannot be read: {msg}")
    try:
        found = _attachments(msg, copies)
        if not 1 <= number <= len(found):
            have = f"1 to {len(found)}" if found else "none"
            raise MessageError(f"the message has no attachment {number} (its attachments: {have})")
        part, leaf = found[number - 1]
        if not part.text:
            raise MessageError(f"attachment {part.line()} is binary: it is listed, not shown")
        text = _text_of(leaf)
    except READ_ERRORS as e:
        raise MessageError(f"attachment {number} is not readable: {type(e).__name__}") from None
    more = len(text) - MAX_PART_TEXT
    if more > 0:
        text = text[:MAX_PART_TEXT] + f"\n[… {more} more characters not shown]\n"
    return part, text


# ---------------------------------------------------------------- the parts


def _plain(data: bytes, cte: str, charset: str) -> str:
    """A text/plain body's bytes, transfer-decoded and charset-decoded."""
    if cte == "quoted-printable":
        import quopri  # lazy: start-up time, as in message.encode_body

        data = quopri.decodestring(data.replace(b"\r\n", b"\n"))
    elif cte == "base64":
        import base64  # lazy: start-up time
        import binascii

        try:
            data = base64.b64decode(data, validate=False)
        except (binascii.Error, ValueError):
            pass
    return _decode(data, charset)


def _decode(data: bytes, charset: str) -> str:
    try:
        text = data.decode(charset, "replace")
    except (LookupError, ValueError, TypeError):  # unknown, or not a text codec ("base64", "idna" with replace)
        text = data.decode("utf-8", "replace")
    return no_surrogates(text).replace("\r\n", "\n").replace("\r", "\n")


def _message(raw: bytes) -> Message | str:
    """The parsed message, or why it is not read (too many nested parts for a reader)."""
    if multiparts(raw) + len(MESSAGE_RE.findall(raw)) > MAX_MULTIPARTS:
        return f"[body not shown: more than {MAX_MULTIPARTS} nested multipart parts]"
    import email  # lazy: start-up time; only a body that is not plain text needs the full parser
    import email.policy

    try:
        return email.message_from_bytes(raw, policy=email.policy.default)
    except READ_ERRORS as e:
        return f"[body not readable: {type(e).__name__}]"


def _leaves(msg: Message) -> list[tuple[Message, bool]]:
    """The leaf parts in order, each with whether it is one rendering of a multipart/alternative
    (shown as the body, never as an attachment); a message/rfc822 part is one leaf."""
    out: list[tuple[Message, bool]] = []
    stack: list[tuple[Message, bool]] = [(msg, False)]
    while stack and len(out) < MAX_PARTS:
        part, alt = stack.pop()
        if part.get_content_maintype() == "multipart" and isinstance(part.get_payload(), list):
            kids = [k for k in part.get_payload() if hasattr(k, "get_content_type")]
            inner = part.get_content_subtype() == "alternative"
            stack.extend((k, inner) for k in reversed(kids))
        else:
            out.append((part, alt))
    return out


def _readable(msg: Message, copies: bool) -> Body:
    return Body(_body(msg)[0], tuple(p for p, _ in _attachments(msg, copies)))


def _body(msg: Message) -> tuple[str, list[Message]]:
    """The body's text and the parts it was read from."""
    plain = msg.get_body(("plain",))
    text = _text_of(plain) if plain is not None else ""
    used = [plain] if plain is not None else []
    if not text.strip():
        html = msg.get_body(("html",))
        if html is not None:
            from workflow.mail.htmltext import html_text  # lazy: start-up time; only HTML bodies need it

            text = html_text(_text_of(html))
            used.append(html)
    return text, used


def _attachments(msg: Message, copies: bool = False) -> list[tuple[Part, Message]]:
    """Every leaf part that is neither the body nor another rendering of it, numbered from 1
    (without the artifact's copies unless ``copies``)."""
    used = _body(msg)[1]
    out: list[tuple[Part, Message]] = []
    for part, alt in _leaves(msg):
        if any(part is u for u in used) or (alt and not part.is_attachment() and part.get_content_maintype() == "text"):
            continue
        if not copies and part.get(COPY_HEADER) is not None:
            continue
        ctype = part.get_content_type()
        payload = part.get_payload(decode=True) if ctype != "message/rfc822" else None
        size = len(payload) if isinstance(payload, bytes) else len(_text_of(part).encode())
        name = " ".join(str(part.get_filename() or "").split())[:200]
        text = ctype.startswith("text/") or ctype in TEXT_TYPES or ctype.endswith(("+json", "+xml"))
        out.append((Part(len(out) + 1, name, ctype, size, text), part))
    return out


def _text_of(part: Message) -> str:
    """A leaf part's content as text: its charset decoded (a forwarded message as its bytes)."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        first = inner[0] if isinstance(inner, list) and inner else None
        return _decode(first.as_bytes() if first is not None and not isinstance(first, str) else b"", "utf-8")
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return ""
    return _decode(data, part.get_content_charset() or "utf-8")
