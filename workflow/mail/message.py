"""Message: build, parse and validate RFC 5322 workflow mail (headers, Message-ID, threading).

Builds bytes ourselves (CRLF, folded, RFC 2047 for anything that is not plain ASCII) instead of
trusting ``email.generator``: CPython before 3.11.10 could emit a newline hidden in an
encoded-word as a real header break (CVE-2024-6923). Parsing decodes every value and refuses
CR, LF or NUL in the decoded text, so no value can ever smuggle in an extra header.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

from workflow.core.errors import MessageError
from workflow.mail.ids import given_msgid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NamedTuple
else:
    from workflow.core.records import NamedTuple

MAX_LINE = 998
MAX_HEADER_BLOCK = 256 * 1024  # octets of a header block, at most (Postfix keeps 100 KB of one)
FOLD_AT = 78
MSGID_RE = re.compile(r"<[^<>\s]+>")
MSGID_FULL_RE = re.compile(r"^<[^<>\s@]+@[^<>\s@]+>$")
MSGID_REF_RE = re.compile(r"^<[^<>\s]+>$")  # what we accept as a reference to someone else's id
FORBIDDEN_RE = re.compile(r"[\r\n\0]")
SINGLE_HEADERS = ("Message-ID", "In-Reply-To", "X-Event-Type", "X-Workflow-State", "X-Artifacts", "Subject", "From")
RE_PREFIX = re.compile(r"^\s*((re|fwd?|aw|sv)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
PLAIN_HEADER_CHARS = re.compile(r"^[\x20-\x7e\t]*$")


SIMPLE_MAILBOX = re.compile(r'^\s*(?:[^<>,"()@:;\\]*<)?([^\s<>,"()@:;\\]+@[^\s<>,"()@:;\\]+)>?\s*$')


def mailboxes(value: str) -> list[str]:
    """The addr-specs of an address-list header, lower-cased (RFC 5322; groups and comments
    handled by the email package when the value is not one plain mailbox)."""
    m = SIMPLE_MAILBOX.match(value)
    if m and (("<" in value) == value.rstrip().endswith(">")):
        return [m.group(1).lower()]
    from email.utils import getaddresses  # lazy: the plain forms above are the common case

    return [addr.lower() for _, addr in getaddresses([value]) if "@" in addr]


def check_value(name: str, value: str) -> None:
    """Refuse a header value that could break out of its header."""
    for ch, what in (("\r", "a carriage return (CR)"), ("\n", "a line feed (LF)"), ("\0", "a NUL byte")):
        if ch in value:
            raise MessageError(f"header {name}: value contains {what}; header values must be one line")


def validate_artifact(path: str) -> str:
    """A repo-relative path or glob: never absolute, never '..', no whitespace, commas or controls."""
    p = path.strip()
    if not p:
        raise MessageError("artifact path is empty")
    if p.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", p):
        raise MessageError(f"artifact path {p!r} is absolute; give a repo-relative path like specs/proposed/auth.md")
    if any(part == ".." for part in re.split(r"[/\\]", p)):
        raise MessageError(f"artifact path {p!r} contains '..'; paths must stay inside the repository")
    if re.search(r"[\s,\x00-\x1f\x7f\\]", p):
        raise MessageError(f"artifact path {p!r} contains whitespace, a comma, a backslash or a control character")
    return p


def make_message_id(role: str, domain: str, now: datetime | None = None) -> str:
    """``<YYYYMMDDHHMMSS.<unique>.<role>@domain>`` (docs/message-format.md)."""
    return message_id_at(id_stamp(now or datetime.now(UTC)), role, domain)


def id_stamp(when: datetime) -> str:
    """The time part of a Message-ID: ``YYYYMMDDHHMMSS``."""
    return when.strftime("%Y%m%d%H%M%S")


def message_id_at(stamp: str, role: str, domain: str) -> str:
    """A new Message-ID with the time part ``stamp`` (``id_stamp``)."""
    return f"<{stamp}.{os.urandom(6).hex()}.{role}@{domain}>"


def normalize_msgid(value: str) -> str:
    """A Message-ID given on the command line or by an agent, in angle brackets; refused unless
    it has RFC 5322's form (``<left@right>``)."""
    v = given_msgid(value)
    if v is None:
        raise MessageError(f"{value!r} is not a Message-ID like <20251114103000.abc.spec-writer@workflow.local>")
    return v


def reply_subject(subject: str) -> str:
    return "Re: " + RE_PREFIX.sub("", subject).strip()


def _fold_plain(name: str, value: str) -> str | None:
    """Fold a plain ASCII value at single spaces; None when a line would still exceed 998."""
    words = value.split(" ")
    lines: list[str] = []
    cur = f"{name}: {words[0]}"
    for w in words[1:]:
        if len(cur) + 1 + len(w) > FOLD_AT and cur.strip():
            lines.append(cur)
            cur = " " + w
        else:
            cur += " " + w
    lines.append(cur)
    if any(len(line) > MAX_LINE for line in lines):
        return None
    # A folded line that is all whitespace would be dropped by unfolding readers; keep it unfolded.
    if any(not line.strip() for line in lines[1:]):
        joined = f"{name}: {value}"
        return joined if len(joined) <= MAX_LINE else None
    return "\r\n".join(lines)


def encode_header(name: str, value: str) -> str:
    """One header as folded text with CRLF continuation lines (no trailing CRLF)."""
    check_value(name, value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MessageError(f"header {name}: value is not valid Unicode text") from None
    plain = PLAIN_HEADER_CHARS.match(value) is not None and "=?" not in value and value == value.strip(" \t")
    if plain:
        folded = _fold_plain(name, value)
        if folded is not None:
            return folded
    return f"{name}: " + "\r\n ".join(_encoded_words(value))


def _encoded_words(value: str) -> list[str]:
    """RFC 2047 'B' encoded-words of at most 45 UTF-8 bytes each, never splitting a character.

    Written here because email.header.Header.encode drops or rewrites some whitespace
    (a lone form feed encodes to nothing), which would break the round trip.
    """
    import base64  # lazy: start-up time; only non-ASCII headers are encoded, and readers start often

    words: list[bytes] = []
    chunk = b""
    for ch in value:
        b = ch.encode("utf-8")
        if len(chunk) + len(b) > 45:
            words.append(chunk)
            chunk = b""
        chunk += b
    if chunk or not words:
        words.append(chunk)
    return ["=?utf-8?b?" + base64.b64encode(w).decode("ascii") + "?=" for w in words]


ENCODED_WORD_RE = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")


def _decode_word(charset: str, enc: str, text: str) -> bytes | None:
    import base64  # lazy: start-up time, as in _encoded_words
    import binascii

    try:
        if enc in "bB":
            return base64.b64decode(text + "=" * (-len(text) % 4))
        out = re.sub(r"=([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text.replace("_", " "))
        return out.encode("latin-1")
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None


def no_surrogates(text: str) -> str:
    """``text`` without lone surrogates (a codec such as unicode_escape makes them from mail;
    nothing can encode them — not SQLite, not a terminal): each becomes "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _decode_value(value: str) -> str:
    """Decode RFC 2047 encoded-words; whitespace between adjacent encoded-words is dropped."""
    if "=?" not in value:
        return value
    out: list[str] = []
    pending: list[tuple[str, bytes]] = []  # adjacent encoded-words, decoded together per charset
    pos = 0

    def flush() -> None:
        for cs, data in pending:
            try:
                text = data.decode(cs.split("*")[0], "replace")
            except (LookupError, ValueError, TypeError):  # unknown, or no text codec ("idna", "base64")
                text = data.decode("utf-8", "replace")
            out.append(no_surrogates(text))
        pending.clear()

    for m in ENCODED_WORD_RE.finditer(value):
        between = value[pos : m.start()]
        data = _decode_word(m.group(1), m.group(2), m.group(3))
        if data is None:
            continue
        if between.strip(" \t") or not pending:
            flush()
            out.append(between)
        cs = m.group(1).lower()
        if pending and pending[-1][0] == cs:
            pending[-1] = (cs, pending[-1][1] + data)
        else:
            pending.append((cs, data))
        pos = m.end()
    flush()
    out.append(value[pos:])
    return "".join(out)


def canonical_body(text: str) -> str:
    """The body as it reads back: LF line ends, ending in exactly the text given plus one LF."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def encode_body(text: str) -> tuple[str, bytes]:
    """(Content-Transfer-Encoding, CRLF bytes): 7bit for short plain ASCII lines, else quoted-printable."""
    text = canonical_body(text)
    lines = text.split("\n")[:-1]
    if all(len(line) <= MAX_LINE and PLAIN_HEADER_CHARS.match(line) for line in lines):
        return "7bit", "".join(line + "\r\n" for line in lines).encode("ascii")
    import quopri  # lazy: start-up time; plain bodies need no encoding

    raw = text.encode("utf-8", "surrogatepass")
    # quotetabs keeps trailing whitespace intact; header=False keeps '_' literal.
    qp = quopri.encodestring(raw, quotetabs=False).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return "quoted-printable", qp


class MimePart(NamedTuple):
    """A text part after a message's body (``mail.artparts`` makes the artifact's copies)."""

    text: str
    content_type: str = "text/plain"  # a text/* type; sent as UTF-8
    filename: str = ""  # plain ASCII ([A-Za-z0-9._-]); "" for none
    inline: bool = True  # Content-Disposition inline (shown in the reader's pager) or attachment
    mark: str = ""  # X-Workflow-Copy: what the part is a copy of, for readers that drop copies


class Draft(NamedTuple):
    """Everything a workflow message carries, before it becomes bytes."""

    sender: str
    to: Sequence[str]
    subject: str
    body: str
    message_id: str
    cc: Sequence[str] = ()
    event: str | None = None
    state: str | None = None
    artifacts: Sequence[str] = ()
    next_roles: Sequence[str] = ()
    in_reply_to: str | None = None
    references: Sequence[str] = ()
    date: datetime | None = None
    extra: Sequence[tuple[str, str]] = ()
    parts: Sequence[MimePart] = ()  # parts after the body: the message becomes multipart/mixed


RESERVED_HEADERS = frozenset(
    h.lower()
    for h in (
        "From",
        "To",
        "Cc",
        "Bcc",
        "Date",
        "Message-ID",
        "In-Reply-To",
        "References",
        "Subject",
        "X-Event-Type",
        "X-Workflow-State",
        "X-Artifacts",
        "X-Next-Roles",
        "MIME-Version",
        "Content-Type",
        "Content-Transfer-Encoding",
        "Return-Path",
        "Received",
    )
)
HEADER_NAME_RE = re.compile(r"^[!-9;-~]+$")  # RFC 5322 ftext: printable ASCII but the colon


def field_name(raw: str) -> str:
    """A header line's field name as every reader of ours takes it: what precedes the first colon,
    without the spaces and tabs RFC 5322's obsolete syntax allows before it — and nothing else
    stripped (``str.strip`` would also drop ``\\x1c``-``\\x1f``, NEL and no-break spaces, making
    ``From\\x1c`` read as ``From``). A name this leaves that is not ftext (``HEADER_NAME_RE``) is
    no header at all to a reader: ``Parsed.get`` never finds it, ``validate`` refuses it, and the
    Gmail bridge renames it away (``bridges.gmail.outside``)."""
    return raw.strip(" \t")


def build(d: Draft) -> bytes:
    """Serialise a Draft to CRLF bytes, refusing any value that could break a header."""
    if not MSGID_FULL_RE.match(d.message_id):
        raise MessageError(f"Message-ID {d.message_id!r} is not of the form <left@right>")
    for mid in ([d.in_reply_to] if d.in_reply_to else []) + list(d.references):
        if not MSGID_REF_RE.match(mid):
            raise MessageError(f"message id {mid!r} is not of the form <left@right>")
    from email.utils import format_datetime  # lazy: start-up time (the email package costs ~30 ms)

    arts = [validate_artifact(a) for a in d.artifacts]
    headers: list[tuple[str, str]] = [
        ("Date", format_datetime(d.date or datetime.now(UTC))),
        ("From", d.sender),
        ("To", ", ".join(d.to)),
    ]
    if d.cc:
        headers.append(("Cc", ", ".join(d.cc)))
    headers += [("Subject", d.subject), ("Message-ID", d.message_id)]
    if d.in_reply_to:
        headers.append(("In-Reply-To", d.in_reply_to))
    if d.references:
        headers.append(("References", " ".join(d.references)))
    if d.event:
        headers.append(("X-Event-Type", d.event))
    if d.state:
        headers.append(("X-Workflow-State", d.state))
    if arts:
        headers.append(("X-Artifacts", ", ".join(arts)))
    if d.next_roles:
        headers.append(("X-Next-Roles", ", ".join(d.next_roles)))
    for name, value in d.extra:
        if not HEADER_NAME_RE.match(name) or name.lower() in RESERVED_HEADERS:
            raise MessageError(f"header name {name!r} is not allowed as an extra header")
        headers.append((name, value))
    for addr_header in ("From", "To", "Cc"):
        for name, value in headers:
            if name == addr_header and not PLAIN_HEADER_CHARS.match(value):
                raise MessageError(f"header {name}: addresses must be ASCII, got {value!r}")
    cte, body = encode_body(d.body)
    if d.parts:
        boundary, body = _multipart([_part_bytes(MimePart(d.body), cte, body)] + [_part_bytes(p) for p in d.parts])
        headers += [("MIME-Version", "1.0"), ("Content-Type", f'multipart/mixed; boundary="{boundary}"')]
    else:
        headers += [
            ("MIME-Version", "1.0"),
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Transfer-Encoding", cte),
        ]
    head = "".join(encode_header(n, v) + "\r\n" for n, v in headers)
    return head.encode("ascii") + b"\r\n" + body


PART_TYPE_RE = re.compile(r"^text/[a-z0-9.+-]+$")
PART_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def _part_bytes(p: MimePart, cte: str = "", body: bytes = b"") -> bytes:
    """One part of a multipart/mixed body: its headers and its encoded text."""
    if not PART_TYPE_RE.match(p.content_type):
        raise MessageError(f"part type {p.content_type!r} is not a text/* type")
    if p.filename and not PART_NAME_RE.match(p.filename):
        raise MessageError(f"part file name {p.filename!r} is not plain ASCII ([A-Za-z0-9._-])")
    if p.mark and not HEADER_NAME_RE.match(p.mark):
        raise MessageError(f"part mark {p.mark!r} is not one plain word")
    if not cte:
        cte, body = encode_body(p.text)
    name = f'; filename="{p.filename}"' if p.filename else ""
    lines = [f"Content-Type: {p.content_type}; charset=utf-8", f"Content-Transfer-Encoding: {cte}"]
    lines += [f"Content-Disposition: {'inline' if p.inline else 'attachment'}{name}"]
    lines += [f"X-Workflow-Copy: {p.mark}"] if p.mark else []
    return "".join(line + "\r\n" for line in lines).encode("ascii") + b"\r\n" + body


def _multipart(parts: Sequence[bytes]) -> tuple[str, bytes]:
    """The boundary and the body of a multipart/mixed of ``parts``. The boundary is a hash of the
    parts (the same copies make the same bytes), and never a line any part holds."""
    import hashlib  # lazy: only a message with parts needs it

    salt = 0
    while True:
        digest = hashlib.sha256(b"%d" % salt + b"".join(parts[1:])).hexdigest()[:24]
        b = ("=_workflow_" + digest).encode("ascii")
        if not any(b"--" + b in part for part in parts):
            break
        salt += 1
    out = b"This is a multipart message in MIME format.\r\n"
    for part in parts:
        out += b"\r\n--" + b + b"\r\n" + part
    return b.decode("ascii"), out + b"\r\n--" + b + b"--\r\n"


# ---------------------------------------------------------------- parsing


class Parsed:
    """A message's headers (unfolded and decoded) and where its body starts in the raw bytes."""

    __slots__ = ("headers", "body_offset", "max_line", "_by_name", "_memo")

    def __init__(self, headers: tuple[tuple[str, str], ...], body_offset: int, max_line: int = 0) -> None:
        self.headers = headers
        self.body_offset = body_offset
        self.max_line = max_line  # longest header line in octets, CRLF excluded
        by_name: dict[str, list[str]] = {}
        for n, v in headers:
            if HEADER_NAME_RE.match(n):  # ASCII only, so lower() maps no other letter onto one (KELVIN SIGN → k)
                by_name.setdefault(n.lower(), []).append(v)
        self._by_name = by_name
        self._memo: dict[str, str | None | tuple[str, ...]] = {}  # what the properties below derived

    def get(self, name: str) -> str | None:
        values = self._by_name.get(name.lower())
        return values[0] if values else None

    def get_all(self, name: str) -> list[str]:
        return list(self._by_name.get(name.lower(), ()))

    @property
    def counts(self) -> dict[str, int]:
        """How often each header (lower-case name) appears."""
        return {n: len(v) for n, v in self._by_name.items()}

    @property
    def message_id(self) -> str | None:
        if "mid" not in self._memo:
            v = self.get("Message-ID")
            m = MSGID_RE.search(v) if v else None
            self._memo["mid"] = m.group(0) if m else None
        return self._memo["mid"]  # type: ignore[return-value]

    @property
    def in_reply_to(self) -> str | None:
        v = self.get("In-Reply-To")
        m = MSGID_RE.search(v) if v else None
        return m.group(0) if m else None

    @property
    def references(self) -> list[str]:
        v = self.get("References")
        return MSGID_RE.findall(v) if v else []

    @property
    def subject(self) -> str:
        return self.get("Subject") or ""

    @property
    def sender(self) -> str:
        """The addr-spec of From: (parsed as an RFC 5322 mailbox, not scanned for something
        address-like: a display name that looks like an address is only a display name)."""
        if "from" not in self._memo:
            v = self.get("From") or ""
            one = mailboxes(v)
            self._memo["from"] = one[0] if len(one) == 1 else v.strip().lower()
        return self._memo["from"]  # type: ignore[return-value]

    @property
    def in_reply_to_ids(self) -> list[str]:
        """Every Message-ID in In-Reply-To (RFC 5322 allows several)."""
        v = self.get("In-Reply-To")
        return MSGID_RE.findall(v) if v else []

    @property
    def recipients(self) -> list[str]:
        if "rcpt" not in self._memo:
            out: list[str] = []
            for h in ("To", "Cc"):
                for v in self.get_all(h):
                    out.extend(mailboxes(v))
            self._memo["rcpt"] = tuple(out)
        return list(self._memo["rcpt"])  # type: ignore[arg-type]

    @property
    def event(self) -> str | None:
        v = self.get("X-Event-Type")
        return v.strip() if v else None

    @property
    def state(self) -> str | None:
        v = self.get("X-Workflow-State")
        return v.strip() if v else None

    @property
    def artifacts(self) -> list[str]:
        v = self.get("X-Artifacts")
        return [a.strip() for a in v.split(",") if a.strip()] if v else []

    @property
    def next_roles(self) -> list[str]:
        v = self.get("X-Next-Roles")
        return [a.strip() for a in v.split(",") if a.strip()] if v else []


def to_lf(raw: bytes) -> bytes:
    """A message with LF line ends, as Maildir stores it (Postfix and Dovecot's LDA convert too)."""
    return raw.replace(b"\r\n", b"\n")


def to_crlf(raw: bytes) -> bytes:
    """A message with CRLF line ends, as SMTP carries it (whatever it had before)."""
    return to_lf(raw).replace(b"\n", b"\r\n")


def split_head(raw: bytes) -> tuple[bytes, int]:
    """The header block and the offset where the body starts (after the first empty line)."""
    a = raw.find(b"\n\r\n")
    b = raw.find(b"\n\n")
    if a != -1 and (b == -1 or a < b):
        head = raw[:a]
        return (head[:-1] if head.endswith(b"\r") else head), a + 3
    if b != -1:
        return raw[:b], b + 2
    return raw, len(raw)


def parse(raw: bytes) -> Parsed:
    """Parse the header block quickly (no email.parser), unfolding and decoding each value."""
    head, offset = split_head(raw)
    if len(head) <= MAX_LINE:
        max_line = len(head)  # no line can be longer than the whole block
    else:
        max_line = max(map(len, head.replace(b"\r\n", b"\n").split(b"\n")))
    headers: list[list[str]] = []
    for line in head.decode("utf-8", "replace").replace("\r\n", "\n").split("\n"):
        if line[:1] in (" ", "\t"):
            if headers:
                headers[-1][1] += line
            continue
        colon = line.find(":")
        if colon <= 0:
            continue  # not a header line (e.g. an mbox "From " line): ignored, never fatal
        headers.append([field_name(line[:colon]), line[colon + 1 :]])
    decoded = tuple((n, _decode_value(v.strip(" \t"))) for n, v in headers)
    return Parsed(decoded, offset, max_line)


MAX_MULTIPARTS = 100  # multipart containers one message may hold (at DATA and when read)
MULTIPART_RE = re.compile(rb"(?im)^content-type:[ \t]*(?:\r?\n[ \t]+)?multipart/")


def multiparts(raw: bytes) -> int:
    """How many multipart containers a message declares: an upper bound on its nesting depth."""
    return len(MULTIPART_RE.findall(raw))


def validate(
    parsed: Parsed,
    *,
    event_types: Sequence[str],
    states: Sequence[str],
    check_lines: bool = True,
) -> None:
    """Refuse what the workflow formats forbid; names the header and the reason."""
    for name, value in parsed.headers:
        if not HEADER_NAME_RE.match(name):
            raise MessageError(f"header name {name!r} is not a valid RFC 5322 field name")
        if FORBIDDEN_RE.search(value):
            check_value(name, value)  # raises, naming the character
    if check_lines and parsed.max_line > MAX_LINE:
        raise MessageError(f"a header line is {parsed.max_line} octets; RFC 5322 allows at most {MAX_LINE}")
    if check_lines and parsed.body_offset > MAX_HEADER_BLOCK:
        raise MessageError(f"the header block is {parsed.body_offset} octets; at most {MAX_HEADER_BLOCK} are taken")
    counts = parsed.counts
    for single in SINGLE_HEADERS:
        if counts.get(single.lower(), 0) > 1:
            raise MessageError(f"header {single}: appears more than once")
    mid = parsed.get("Message-ID")
    if mid is not None and not MSGID_FULL_RE.match(mid.strip()):
        raise MessageError(f"header Message-ID: {mid!r} is not of the form <left@right>")
    sender = parsed.get("From")
    if sender is not None and len(mailboxes(sender)) != 1:
        raise MessageError(f"header From: {sender[:200]!r} must name exactly one mailbox (name <role@domain>)")
    for name in ("In-Reply-To", "References"):
        for value in parsed.get_all(name):
            rest = MSGID_RE.sub(" ", value)
            if rest.strip() or not MSGID_RE.search(value):
                raise MessageError(
                    f"header {name}: {value[:200]!r} must be Message-IDs like <left@right>, nothing else"
                )
    event = parsed.event
    if event is not None and event not in event_types:
        raise MessageError(
            f"header X-Event-Type: unknown event type {event!r}; expected one of {', '.join(event_types)}"
        )
    state = parsed.state
    if state is not None and state not in states:
        raise MessageError(f"header X-Workflow-State: unknown state {state!r}; expected one of {', '.join(states)}")
    for art in parsed.artifacts:
        try:
            validate_artifact(art)
        except MessageError as e:
            raise MessageError(f"header X-Artifacts: {e}") from None


def thread_ids(parsed: Parsed) -> list[str]:
    """Ancestry in order, parents last (References then every In-Reply-To id, without duplicates)."""
    return list(dict.fromkeys(parsed.references + parsed.in_reply_to_ids))  # linear: 40,000 ids are a sender's choice
