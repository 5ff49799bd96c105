"""Gmail's IMAP at the wire, for what Dovecot cannot play: X-GM-EXT-1 (labels, X-GM-THRID).

One mailbox of messages, each with a UID, flags, Gmail labels and a thread id. Folders are
views, as on Gmail: INBOX holds what carries the ``\\Inbox`` label, ``[Gmail]/Sent Mail`` what
carries ``\\Sent``, ``[Gmail]/All Mail`` everything (LIST says so with special-use flags).
Commands: CAPABILITY, LOGIN, LIST, SELECT/EXAMINE, UID SEARCH (ALL, UID n:m, X-GM-LABELS,
X-GM-THRID, HEADER), UID FETCH (UID, FLAGS, X-GM-LABELS, X-GM-THRID, BODY[]/BODY.PEEK[…]),
UID STORE (±X-GM-LABELS, ±FLAGS, .SILENT), NOOP, LOGOUT. Every command is recorded.
"""

from __future__ import annotations

import re
import socketserver
import threading
from dataclasses import dataclass, field

CAPS = "IMAP4rev1 X-GM-EXT-1 UIDPLUS MOVE IDLE"
FOLDERS = {"INBOX": "\\Inbox", "[Gmail]/Sent Mail": "\\Sent", "[Gmail]/All Mail": None}
SPECIAL = {"INBOX": "", "[Gmail]/Sent Mail": "\\Sent ", "[Gmail]/All Mail": "\\All "}
TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|(\()|(\))|([^\s()"]+)')


@dataclass
class Message:
    uid: int
    raw: bytes
    thread: int
    labels: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def tokens(text: str) -> list[object]:
    """A command's arguments: strings, and lists for parenthesised groups."""
    out: list[object] = []
    stack = [out]
    for q, op, cl, atom in TOKEN.findall(text):
        if op:
            stack[-1].append([])
            stack.append(stack[-1][-1])  # type: ignore[arg-type]
        elif cl:
            stack.pop()
        else:
            stack[-1].append(re.sub(r"\\(.)", r"\1", q) if q or not atom else atom)
    return out


def _in(uid: int, spec: str, top: int) -> bool:
    for part in spec.split(","):
        lo, _, hi = part.partition(":")
        a = top if lo == "*" else int(lo)
        b = a if not hi else (max(top, uid) if hi == "*" else int(hi))
        if min(a, b) <= uid <= max(a, b):
            return True
    return False


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class FakeGmail:
    def __init__(self, user: str, password: str, uidvalidity: int = 7) -> None:
        self.user, self.password, self.uidvalidity = user, password, uidvalidity
        self.messages: list[Message] = []
        self.commands: list[str] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                fake.session(self)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, raw: bytes, thread: int, labels: list[str], flags: list[str] | None = None) -> int:
        with self.lock:
            uid = max((m.uid for m in self.messages), default=0) + 1
            self.messages.append(Message(uid, raw, thread, list(labels), list(flags or [])))
            return uid

    def get(self, uid: int) -> Message:
        return next(m for m in self.messages if m.uid == uid)

    def view(self, folder: str) -> list[Message]:
        label = FOLDERS.get(folder)
        return [m for m in self.messages if label is None or label in m.labels]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the protocol

    def session(self, h: socketserver.StreamRequestHandler) -> None:
        def send(line: str | bytes) -> None:
            h.wfile.write(line if isinstance(line, bytes) else line.encode() + b"\r\n")

        send(f"* OK [CAPABILITY {CAPS}] Gimap ready")
        folder = "INBOX"
        while True:
            line = h.rfile.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            self.commands.append(text)
            tag, _, rest = text.partition(" ")
            cmd, _, args = rest.partition(" ")
            cmd = cmd.upper()
            if cmd == "UID":
                cmd, _, args = args.partition(" ")
                cmd = "UID " + cmd.upper()
            with self.lock:
                if cmd == "CAPABILITY":
                    send(f"* CAPABILITY {CAPS}")
                elif cmd == "LOGIN":
                    user, password = (str(t) for t in tokens(args)[:2])
                    if (user, password) != (self.user, self.password):
                        send(f"{tag} NO [AUTHENTICATIONFAILED] Invalid credentials")
                        continue
                elif cmd == "LIST":
                    for name in FOLDERS:
                        send(f'* LIST ({SPECIAL[name]}\\HasNoChildren) "/" {_quote(name)}')
                elif cmd in ("SELECT", "EXAMINE"):
                    folder = str(tokens(args)[0])
                    if folder not in FOLDERS:
                        send(f"{tag} NO [NONEXISTENT] Unknown Mailbox: {folder}")
                        continue
                    send("* FLAGS (\\Answered \\Flagged \\Draft \\Deleted \\Seen)")
                    send(f"* {len(self.view(folder))} EXISTS")
                    send("* 0 RECENT")
                    send(f"* OK [UIDVALIDITY {self.uidvalidity}] UIDs valid.")
                    send(f"* OK [UIDNEXT {max((m.uid for m in self.messages), default=0) + 1}] Predicted next UID.")
                elif cmd == "UID SEARCH":
                    found = self.search(folder, tokens(args))
                    send("* SEARCH" + "".join(f" {u}" for u in found))
                elif cmd == "UID FETCH":
                    spec, _, items = args.partition(" ")
                    for seq, m in self.matching(folder, spec):
                        send(self.fetch(seq, m, items.upper()))
                elif cmd == "UID STORE":
                    spec, what, *rest_ = tokens(args)
                    values = [str(v) for v in (rest_[0] if rest_ and isinstance(rest_[0], list) else rest_)]
                    for seq, m in self.matching(folder, str(spec)):
                        target = m.labels if "X-GM-LABELS" in str(what).upper() else m.flags
                        for v in values:
                            if str(what).startswith("+") and v not in target:
                                target.append(v)
                            elif str(what).startswith("-") and v in target:
                                target.remove(v)
                        if not str(what).upper().endswith(".SILENT"):
                            send(f"* {seq} FETCH (UID {m.uid} {self.labels_item(m)})")
                elif cmd == "LOGOUT":
                    send("* BYE LOGOUT Requested")
                    send(f"{tag} OK 73 good day (Success)")
                    return
                elif cmd != "NOOP":
                    send(f"{tag} BAD Unknown command {cmd}")
                    continue
            send(f"{tag} OK Success")

    def matching(self, folder: str, spec: str) -> list[tuple[int, Message]]:
        view = self.view(folder)
        top = max((m.uid for m in view), default=0)
        return [(i, m) for i, m in enumerate(view, 1) if _in(m.uid, spec, top)]

    def search(self, folder: str, crit: list[object]) -> list[int]:
        out = []
        for _, m in self.matching(folder, "1:*"):
            ok, i = True, 0
            while i < len(crit):
                key = str(crit[i]).upper()
                if key == "ALL":
                    i += 1
                elif key == "UID":
                    ok &= _in(m.uid, str(crit[i + 1]), max(x.uid for x in self.messages))
                    i += 2
                elif key == "X-GM-LABELS":
                    ok &= str(crit[i + 1]) in m.labels
                    i += 2
                elif key == "X-GM-THRID":
                    ok &= m.thread == int(str(crit[i + 1]))
                    i += 2
                elif key == "HEADER":
                    name, value = str(crit[i + 1]).lower(), str(crit[i + 2]).lower()
                    head = m.raw.split(b"\r\n\r\n", 1)[0].decode("utf-8", "replace").lower()
                    ok &= any(
                        ln.startswith(name + ":") and value in ln for ln in head.replace("\r\n ", " ").splitlines()
                    )
                    i += 3
                else:
                    raise ValueError(f"fake Gmail: no search key {key}")
            if ok:
                out.append(m.uid)
        return out

    def labels_item(self, m: Message) -> str:
        return "X-GM-LABELS (" + " ".join(_quote(lb) for lb in m.labels) + ")"

    def fetch(self, seq: int, m: Message, items: str) -> bytes:
        parts = [f"UID {m.uid}"]
        if "FLAGS" in items.replace("X-GM-LABELS", ""):
            parts.append("FLAGS (" + " ".join(m.flags) + ")")
        if "X-GM-LABELS" in items:
            parts.append(self.labels_item(m))
        if "X-GM-THRID" in items:
            parts.append(f"X-GM-THRID {m.thread}")
        head = f"* {seq} FETCH (" + " ".join(parts)
        if "HEADER.FIELDS" in items:
            lines = [
                ln for ln in m.raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n") if ln.lower().startswith(b"message-id:")
            ]
            body = b"\r\n".join(lines) + b"\r\n\r\n"
            return f"{head} BODY[HEADER.FIELDS (MESSAGE-ID)] {{{len(body)}}}\r\n".encode() + body + b")\r\n"
        if "BODY" in items:
            return f"{head} BODY[] {{{len(m.raw)}}}\r\n".encode() + m.raw + b")\r\n"
        return (head + ")\r\n").encode()
