"""Todo forwarder (docs/bridges.md): every ``todo`` message still in INBOX goes, with its whole thread, to
the configured address; archived on success (label kept), left in INBOX on failure (retried next
cycle). The forward holds the whole thread (INBOX, the archive, Sent; Gmail: the X-GM-THRID
in All Mail) and links the original: Gmail's web link, else an RFC 5092 IMAP URL naming the UID
the message gets in the archive. Both hooks double-check INBOX first (another cycle or a human may have archived it). A
forward carries ``X-Workflow-Forward`` and a Message-ID marked ``todo-forward``; mail that comes
from the forwarding address, answers a forward or is one is never classified todo nor forwarded
(a task service's "Re: Todo: …" acknowledgement would otherwise loop).

``[bridges.gmail.agents.todo_forwarder]``: ``enabled``, ``email`` (missing → "not configured"),
``debug``, ``dry_run`` (it and the bridge's dry-run forward and archive nothing and say what
they would do). The forward has a plain-text and an HTML part (escaped: nothing in a message can
become markup), each thread message with From/To/Date/Subject, and a reference to the original.
"""

from __future__ import annotations

import html
import smtplib
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid, parsedate_to_datetime
from urllib.parse import quote

from workflow.bridges.gmail.agents import Context, Result
from workflow.bridges.gmail.imap import Fetched
from workflow.bridges.gmail.settings import ForwarderConfig
from workflow.core.errors import BridgeError, WorkflowError
from workflow.delivery.credentials import client_credential
from workflow.delivery.transport import SmtpTransport
from workflow.mail.body import body_text
from workflow.mail.message import Parsed, parse, to_crlf

LABEL = "todo"
FORWARD_ID = "todo-forward"  # in every forward's Message-ID: <time.pid.rand.todo-forward@domain>
FORWARD_HEADER = "X-Workflow-Forward"


def echo_of_forward(p: Parsed, dest: str, domain: str) -> str | None:
    """Why a message is an echo of our own forwarding (never a todo to forward), or None: it comes
    from the forwarding address, answers one of our forwards, or is one."""
    if dest and p.sender == dest.strip().lower():
        return f"it comes from the forwarding address {dest}"
    ours = f".{FORWARD_ID}@{domain}>"
    if any(mid.endswith(ours) for mid in [*p.references, *p.in_reply_to_ids]):
        return "it answers one of our forwards"
    if p.get(FORWARD_HEADER) is not None:
        return "it is one of our forwards"
    return None


class TodoForwarder:
    name = "todo_forwarder"
    label = LABEL

    def opts(self, ctx: Context) -> ForwarderConfig:
        return ctx.s.agents.todo_forwarder

    def enabled(self, ctx: Context) -> bool:
        opts = self.opts(ctx)
        return bool(opts.email.strip()) if opts.enabled is None else opts.enabled

    def on_label(self, ctx: Context) -> Result:
        if ctx.tried is not None:
            ctx.tried.add(ctx.uid)
        return self.forward(ctx, ctx.uid)

    def post_label(self, ctx: Context) -> list[Result]:
        ctx.imap.select("INBOX")
        uids = ctx.imap.search(f'X-GM-LABELS "{LABEL}"' if ctx.imap.gmail else f"KEYWORD {LABEL}")
        tried = ctx.tried or set()
        results = [
            Result(self.name, uid, "skipped", "tried this cycle; retried next cycle")
            if uid in tried
            else self.forward(ctx, uid)
            for uid in uids
        ]
        if self.opts(ctx).debug:
            counts = {k: sum(1 for r in results if r.status == k) for k in ("ok", "skipped", "error")}
            ctx.say(
                f"todo_forwarder: scanned {len(uids)}, forwarded {counts['ok']}, "
                f"skipped {counts['skipped']}, errors {counts['error']}"
            )
        return results

    def forward(self, ctx: Context, uid: int) -> Result:
        opts = self.opts(ctx)
        dest = opts.email.strip()
        if not dest or "@" not in dest:
            return Result(self.name, uid, "error", "not configured (set [bridges.gmail.agents.todo_forwarder] email)")
        imap = ctx.imap
        imap.select("INBOX")
        if uid not in imap.search(f"UID {uid}"):
            return Result(self.name, uid, "skipped", "no longer in INBOX")
        got = imap.fetch([uid])
        msg = got[0] if got else None
        just_classified = ctx.dry_run and ctx.uid == uid and ctx.label == LABEL  # dry-run set no label
        if msg is None or (LABEL not in msg.labels and not just_classified):
            return Result(self.name, uid, "skipped", "not labelled todo")
        parsed = parse(msg.raw)
        echo = echo_of_forward(parsed, dest, ctx.app.config.domain)
        if echo is not None:
            return Result(self.name, uid, "skipped", f"not forwarded: {echo}")
        thread = self.thread(ctx, msg)
        subject = parsed.subject or "(no subject)"
        if ctx.dry_run or opts.dry_run:
            ctx.say(
                f"todo_forwarder dry-run: would forward uid {uid} {subject!r} ({len(thread)} message(s)) to {dest} and archive it"
            )
            return Result(self.name, uid, "ok", "dry-run mode")
        try:
            folder = archive_folder(ctx)
            ref, predicted = original_link(ctx, msg, folder)
        except BridgeError as e:
            return Result(self.name, uid, "error", f"cannot reach the archive: {e}")
        raw = build_forward(ctx, thread, dest, subject, ref)
        try:
            sender = ctx.app.roster.address(ctx.s.role)
            if ctx.s.relay_host:  # a relay of the user's own: no workflow login there
                with smtplib.SMTP(ctx.s.relay_host, ctx.s.relay_port, timeout=30) as smtp:
                    smtp.sendmail(sender, [dest], to_crlf(raw))
            else:  # our server, which spools it for the outbound bridge: logged in as the owner
                SmtpTransport(
                    str(ctx.app.config.state.socket), 30.0, client_credential(mail_root=ctx.app.config.mail_root)
                ).send(raw, sender, [dest])
        except (smtplib.SMTPException, OSError, WorkflowError) as e:
            ctx.say(f"todo_forwarder: uid {uid} not forwarded ({e}); it stays in INBOX for the next cycle")
            return Result(self.name, uid, "error", f"send failed: {e}")
        try:
            imap.select("INBOX")
            now = imap.archive(uid, folder)
        except BridgeError as e:
            return Result(self.name, uid, "error", f"forwarded but not archived: {e}")
        if predicted is not None and now is not None and now != predicted:
            ctx.say(
                f"todo_forwarder: uid {uid} became UID {now} in {folder}, not {predicted}: the link in the forward is off"
            )
        ctx.say(f"todo_forwarder: forwarded uid {uid} {subject!r} to {dest}; archived (label kept)")
        return Result(self.name, uid, "ok", f"forwarded to {dest}")

    def thread(self, ctx: Context, msg: Fetched) -> list[bytes]:
        """The whole thread, oldest first: on Gmail every message with the same X-GM-THRID in All
        Mail; elsewhere the message's ancestors and later replies found in INBOX, the archive and
        the Sent folder (the user's own replies)."""
        imap = ctx.imap
        found: dict[str, bytes] = {}
        if imap.gmail and msg.thread_id is not None:
            every = imap.special("\\All")
            if every:
                imap.select(every)
                for f in imap.fetch(imap.search(f"X-GM-THRID {int(msg.thread_id)}")):
                    found.setdefault(parse(f.raw).message_id or f"uid{f.uid}", f.raw)
        else:
            p = parse(msg.raw)
            ids = list(dict.fromkeys([*p.references, *p.in_reply_to_ids, *([p.message_id] if p.message_id else [])]))
            for folder in thread_folders(ctx):
                try:
                    imap.select(folder)
                except BridgeError:
                    continue
                uids: set[int] = set()
                for mid in ids:
                    uids.update(imap.search_header("Message-ID", mid))
                    uids.update(imap.search_header("References", mid))
                    uids.update(imap.search_header("In-Reply-To", mid))
                for f in imap.fetch(sorted(uids)):
                    found.setdefault(parse(f.raw).message_id or f"{folder}/{f.uid}", f.raw)
        imap.select("INBOX")
        found.setdefault(parse(msg.raw).message_id or "", msg.raw)
        return sorted(found.values(), key=_when)


def _when(raw: bytes) -> float:
    try:
        d = parsedate_to_datetime(parse(raw).get("Date") or "")
        return (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()
    except (TypeError, ValueError, IndexError):
        return float("inf")


def archive_folder(ctx: Context) -> str:
    """Where archived mail goes (non-Gmail): ``archive_folder`` when set, else the server's
    special-use \\Archive folder, else ``Archive``."""
    return ctx.s.archive_folder or ctx.imap.special("\\Archive") or "Archive"


def thread_folders(ctx: Context) -> list[str]:
    """INBOX, the archive (configured and special-use), Sent and All Mail: where a thread's
    earlier messages, later replies and the user's own replies are."""
    imap = ctx.imap
    names = ["INBOX", ctx.s.archive_folder, *(imap.special(f) for f in ("\\Archive", "\\Sent", "\\All"))]
    return [n for n in dict.fromkeys(names) if n]


def original_link(ctx: Context, msg: Fetched, folder: str) -> tuple[str, int | None]:
    """A link to the original and, off Gmail, the UID it will have once archived: Gmail's web
    link from X-GM-THRID, else an RFC 5092 IMAP URL (UIDVALIDITY and UIDNEXT of the archive)."""
    s = ctx.s
    if ctx.imap.gmail and msg.thread_id is not None:
        return f"https://mail.google.com/mail/u/0/#all/{int(msg.thread_id):x}", None
    validity, uidnext = ctx.imap.status(folder)
    port = "" if s.imap_port == (993 if s.imap_tls else 143) else f":{s.imap_port}"
    user = quote(s.user, safe="")
    return f"imap://{user}@{s.imap_host}{port}/{quote(folder)};UIDVALIDITY={validity}/;UID={uidnext}", uidnext


def build_forward(ctx: Context, thread: list[bytes], dest: str, subject: str, ref: str) -> bytes:
    text_parts = [f"Todo: {subject}", f"Thread contains {len(thread)} message(s)", f"Original: {ref}", ""]
    html_parts = [
        '<html><body style="max-width: 800px; margin: 0 auto;">',
        f"<h2>Todo: {html.escape(subject)}</h2>",
        f"<p>Thread contains {len(thread)} message(s)</p>",
        f'<p>Original: <a href="{html.escape(ref, quote=True)}">{html.escape(ref)}</a></p>',
    ]
    for raw in thread:
        p = parse(raw)
        head = [
            ("From", p.get("From") or ""),
            ("To", p.get("To") or ""),
            ("Date", p.get("Date") or ""),
            ("Subject", p.subject or ""),
        ]
        body = body_text(raw, p)
        text_parts += [*(f"{k}: {v}" for k, v in head), "", body.rstrip(), "", "-" * 60, ""]
        html_parts.append('<div style="background: #f5f5f5; padding: 15px; margin: 10px 0;">')
        html_parts.append("<div>" + " | ".join(f"<b>{k}:</b> {html.escape(v)}" for k, v in head) + "</div>")
        html_parts.append(f'<pre style="white-space: pre-wrap;">{html.escape(body)}</pre></div>')
    html_parts.append("<footer>Forwarded by the todo forwarder (workflow-mail Gmail bridge)</footer></body></html>")
    m = EmailMessage()
    m["From"] = ctx.app.roster.address(ctx.s.role)
    m["To"] = dest
    m["Subject"] = f"Todo: {subject}"
    m["Date"] = format_datetime(datetime.now(UTC))
    m["Message-ID"] = make_msgid(idstring=FORWARD_ID, domain=ctx.app.config.domain)
    m[FORWARD_HEADER] = "todo_forwarder"
    m.set_content("\n".join(text_parts))
    m.add_alternative("\n".join(html_parts), subtype="html")
    return m.as_bytes(policy=SMTP)
