"""Submit: hand a notification to the running server to compose and deliver (``XNOTIFY``).

``workflow-notify`` must start like a short command, but composing a message needs the whole
project (templates, roster, threading) — which the server has loaded already. So its fast path
(``cli.fast``) logs in as the owner (``handshake``: the server proves itself first) and sends one
command, ``XNOTIFY`` with the request (``delivery.xnotify``, the one wire format of both sides); the
server builds it with ``delivery.notify.request`` and ``compose``, exactly as the command would,
then puts it through the same MAIL, RCPT and DATA checks as any message and answers
``250 2.0.0 <Message-ID> RECIPIENT,…`` or the refusal. ``RefusedError`` means nothing was delivered;
``UnsureError`` means the request went out and no answer came back. It talks to the server's
Unix socket (``delivery.local``), where the owner logs in. Start-up time: this module imports
``handshake``, ``local`` and ``xnotify`` only.
"""

from __future__ import annotations

from workflow.delivery import handshake, local, xnotify

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket


class RefusedError(Exception):
    """The server did not take the request (or could not be reached): nothing was delivered."""


class UnsureError(Exception):
    """The request was sent but no answer came: it may have been delivered."""


class _Conversation:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def reply(self) -> tuple[int, str]:
        """One (possibly multi-line) reply: its code and its last line's text."""
        while True:
            end = self.buffer.find(b"\r\n")
            if end < 0:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise OSError("the server closed the connection")
                self.buffer += chunk
                continue
            line, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
            if len(line) < 3 or not line[:3].isdigit():
                raise OSError(f"not an SMTP reply: {line[:80]!r}")
            if line[3:4] != b"-":
                return int(line[:3]), line[4:].decode("utf-8", "replace")

    def command(self, text: str) -> tuple[int, str]:
        self.sock.sendall(text.encode("utf-8") + b"\r\n")
        return self.reply()


def submit(path: str, timeout: float, login: str, secret: str, req: xnotify.Request) -> tuple[str, list[str]]:
    """Have the server on the Unix socket ``path`` compose and deliver a notification; returns its
    Message-ID and recipients. Raises RefusedError (nothing delivered) or UnsureError (maybe delivered)."""
    try:
        sock = local.connect(path, timeout)
    except OSError as e:
        raise RefusedError(f"cannot reach {path}: {e}") from None
    with sock:
        talk = _Conversation(sock)
        try:
            for code, text in (talk.reply(), talk.command("EHLO workflow-notify")):
                if code // 100 != 2:
                    raise RefusedError(f"{code} {text}")
            try:
                handshake.login(talk.command, login, secret)  # the secret is never sent; the server proves itself
            except handshake.LoginError as e:
                raise RefusedError(str(e)) from None
            sock.sendall(f"{xnotify.COMMAND} {xnotify.encode(req)}\r\n".encode("ascii"))
        except OSError as e:
            raise RefusedError(str(e)) from None
        try:
            code, text = talk.reply()
        except OSError as e:
            raise UnsureError(str(e)) from None
        if code != 250:
            raise RefusedError(f"{code} {text}")
        try:
            talk.command("QUIT")
        except OSError:
            pass  # it was accepted: a failed goodbye changes nothing
    answer = xnotify.read_accepted(text)
    if answer is None:
        raise UnsureError(f"unexpected answer: 250 {text}")
    return answer
