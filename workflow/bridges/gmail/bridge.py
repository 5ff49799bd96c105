"""Gmail bridge: the outside world's mail in, labelled, handed to agents; workflow mail out.

One ``cycle``: import what is new in INBOX (by UID, UIDVALIDITY/UID state persisted after each
message, duplicates skipped by Message-ID) into the mapped role's Maildir with provenance
headers (a reply in a conversation of another role: into that role's too); classify each new message into the four labels (docs/bridges.md) and put the label on the server; run
every enabled agent's ``on_label`` for it; then every agent's ``post_label`` (mail labelled by
hand included); then submit the outbound spool (workflow mail addressed outside the domain)
through SMTP with its Message-ID, In-Reply-To and References intact, so replies thread.
Agents are an explicit registry (``make_agents``); each reads its own ``[bridges.gmail.agents.NAME]``.
"""

from __future__ import annotations

import json
import smtplib
import time
from collections.abc import Callable
from pathlib import Path

from workflow.agents import spend
from workflow.app import App
from workflow.bridges.gmail import conversation, replyloop
from workflow.bridges.gmail.agents import Agent, Context, Result
from workflow.bridges.gmail.classify import LABELS, by_keywords, classify
from workflow.bridges.gmail.forwarder import FORWARD_HEADER, TodoForwarder, echo_of_forward
from workflow.bridges.gmail.forwarder import LABEL as TODO
from workflow.bridges.gmail.imap import Fetched, Imap, secret
from workflow.bridges.gmail.outside import as_outside
from workflow.bridges.gmail.settings import GmailConfig
from workflow.core.errors import BridgeError, ConfigError
from workflow.core.files import write_atomic
from workflow.mail.body import body_text
from workflow.mail.imported import MARK
from workflow.mail.message import Parsed, parse, to_crlf, to_lf
from workflow.policy.roster import OUTBOUND_SPOOL

CLASSIFIER = "gmail-classifier"  # the account the classifier's tokens are booked against


def settings(app: App) -> GmailConfig:
    """``[bridges.gmail]`` (read and checked with the config), refused when absent; its role must exist."""
    s = app.config.section(GmailConfig)
    if s is None:
        raise ConfigError(
            f"{app.config.file}: [bridges.gmail] is not configured (imap_host, user, password_env…; see docs/bridges.md)"
        )
    app.roster.sender(s.role)
    return s


# ------------------------------------------------------------------ state


def load_state(app: App) -> dict[str, int]:
    try:
        data = json.loads(app.config.state.gmail.read_text(encoding="utf-8"))
        return {"uidvalidity": int(data.get("uidvalidity", 0)), "last_uid": int(data.get("last_uid", 0))}
    except (OSError, ValueError):
        return {"uidvalidity": 0, "last_uid": 0}


def save_state(app: App, state: dict[str, int]) -> None:
    write_atomic(app.config.state.gmail, json.dumps(state))


# ------------------------------------------------------------------ agents


def make_agents() -> dict[str, Agent]:
    """The registry: every bridge agent by name (``[bridges.gmail.agents.NAME]`` configures it)."""
    return {"todo_forwarder": TodoForwarder()}


# ------------------------------------------------------------------ the cycle


def provenance(raw: bytes, s: GmailConfig, uidvalidity: int, uid: int, label: str | None) -> bytes:
    src = f"imap://{s.user}@{s.imap_host}/INBOX"
    extra = f"{MARK}: gmail\r\n{MARK}-Source: {src}\r\n{MARK}-UID: {uidvalidity}/{uid}\r\n"  # mail.imported
    if label:
        extra += f"{MARK}-Label: {label}\r\n"
    return extra.encode("ascii") + raw


def import_new(app: App, s: GmailConfig, imap: Imap, say: Callable[[str], None], dry: bool = False) -> list[Fetched]:
    """New INBOX messages since the saved UID (all again after a UIDVALIDITY change; duplicates by
    Message-ID are skipped), each stored in the role's Maildir; state saved after each. A dry run
    stores and saves nothing: the next real cycle sees the same messages as new."""
    state = load_state(app)
    validity = imap.select("INBOX")
    if validity != state["uidvalidity"]:
        if state["uidvalidity"]:
            say(f"UIDVALIDITY changed ({state['uidvalidity']} → {validity}): rescanning INBOX, duplicates are skipped")
        state = {"uidvalidity": validity, "last_uid": 0}
    uids = [u for u in imap.search(f"UID {state['last_uid'] + 1}:*") if u > state["last_uid"]]
    out: list[Fetched] = []
    boxes = app.roster.mailboxes_of(s.role)
    for f in imap.fetch(uids):
        p = parse(f.raw)
        with app.index() as index:
            index.refresh(boxes)
            dup = bool(p.message_id) and bool(index.query(boxes, message_ids=[p.message_id or ""]))
        if dup:
            say(f"uid {f.uid}: {p.message_id} already imported; skipped")
        else:
            out.append(f)
        if dry:
            continue
        state["last_uid"] = max(state["last_uid"], f.uid)
        if not dup:
            label = next((lb for lb in f.labels if lb in LABELS), None)
            outside = as_outside(f.raw, app.config.domain, s.user)  # never poses as a role
            copy = to_lf(provenance(outside, s, validity, f.uid, label))  # IMAP carries CRLF; copies keep LF
            into = [*boxes[:1], *conversation_box(app, s, p)]
            app.maildirs.deliver(into, copy)
            with app.index() as index:  # indexed now: a reply to it is checked against who holds it
                index.refresh(into)
        save_state(app, state)
    if not dry:
        save_state(app, state)
    return out


def conversation_box(app: App, s: GmailConfig, p: Parsed) -> list[str]:
    """A reply in a conversation of another role than the import role's goes to that role too:
    the role answers it, and may only reply to what it received (``reply-visible``)."""
    d = conversation.find(app, [*p.references, *p.in_reply_to_ids])
    role = conversation.role_of(d) if d is not None else ""
    if not role or role == s.role or role not in app.roster.roles:
        return []
    return list(app.roster.mailboxes_of(role)[:1])


def cycle(app: App, s: GmailConfig, say: Callable[[str], None], dry_run: bool = False) -> list[Result]:
    """One pass: import, classify and label, on_label, post_label, outbound."""
    dry = dry_run or s.dry_run
    agents = make_agents()
    results: list[Result] = []
    tried: set[int] = set()  # a failed forward waits for the next cycle (docs/bridges.md: no immediate retry)
    with Imap(s) as imap:
        fresh = import_new(app, s, imap, say, dry)
        for f in fresh:
            p = parse(f.raw)
            label = next((lb for lb in f.labels if lb in LABELS), None)
            if label is None and s.classify:
                why = spend.spent(app, CLASSIFIER)
                text = body_text(f.raw, p)
                if why:
                    c = by_keywords(p.subject or "", text, p.sender or "", why)
                else:
                    c = classify(p.subject or "", text, p.sender or "", s.model)
                    spend.book(app, CLASSIFIER, c.usage)
                label = c.label
                echo = echo_of_forward(p, s.agents.todo_forwarder.email, app.config.domain)
                if label == TODO and echo is not None:
                    label = "summarize"
                    say(f"uid {f.uid}: {p.subject!r} → summarize ({c.method} said todo, but {echo})")
                else:
                    say(f"uid {f.uid}: {p.subject!r} → {label} ({c.method}: {c.reason})")
                if dry:
                    say(f"  dry-run: would label uid {f.uid} {label}")
                else:
                    imap.select("INBOX")
                    imap.add_label(f.uid, label)
            if label is None:
                continue
            ctx = Context(app, s, imap, dry, say, f.uid, f, label, tried)
            for _name, agent in agents.items():
                if agent.label == label and agent.enabled(ctx):
                    results.append(agent.on_label(ctx))
        base = Context(app, s, imap, dry, say, tried=tried)
        for _name, agent in agents.items():
            if agent.enabled(base):
                results.extend(agent.post_label(base))
    replies(app, fresh, say, dry)
    if s.outbound:
        submit_outbound(app, s, say, dry)
    return results


def replies(app: App, fresh: list[Fetched], say: Callable[[str], None], dry: bool = False) -> None:
    """Record replies to conversations, then the reply loop's pass: the roles' answers sent back,
    each conversation with replies not yet answered asked of its role (agentd runs it)."""
    for f in fresh:
        p = parse(f.raw)
        d = conversation.find(app, [*p.references, *p.in_reply_to_ids])
        if d is not None and dry:
            say(f"dry-run: would record a reply to conversation {d.name} from {p.sender}")
        elif d is not None:
            n = conversation.record_reply(
                d, p.sender or "?", body_text(f.raw, p), p.message_id or "", p.get("Date") or ""
            )
            say(f"reply #{n} to conversation {d.name} from {p.sender}")
    replyloop.loop(app, say, dry)


def submit_outbound(app: App, s: GmailConfig, say: Callable[[str], None], dry: bool = False) -> int:
    """Send the spool of workflow mail addressed outside the domain through SMTP submission,
    headers untouched (Message-ID, In-Reply-To, References): replies thread in Gmail."""
    if not s.smtp_host:
        say("outbound: no smtp_host configured; the spool waits")
        return 0
    sent = 0
    for e in list(app.maildirs.scan(OUTBOUND_SPOOL)):
        if "S" in e.flags:
            continue
        raw = Path(e.file).read_bytes()
        p = parse(raw)
        rcpts = [a for a in p.recipients if not a.endswith("@" + app.config.domain)]
        if dry:
            say(f"outbound dry-run: would submit {p.message_id} to {', '.join(rcpts)}")
            continue
        try:
            cls = smtplib.SMTP_SSL if s.smtp_tls == "ssl" else smtplib.SMTP
            with cls(s.smtp_host, s.smtp_port, timeout=30) as smtp:
                if s.smtp_tls == "starttls":
                    smtp.starttls()
                if s.password_env or s.password_file:
                    smtp.login(s.user, secret(s))
                smtp.sendmail(s.user, rcpts, to_crlf(raw))  # stored with LF; SMTP wants CRLF
        except (smtplib.SMTPException, OSError) as err:
            say(f"outbound: {p.message_id} not sent yet: {err}")
            continue
        app.maildirs.mark_seen(e.mailbox, e.key)
        sender_role = (p.sender or "").rsplit("@", 1)[0]
        if sender_role in app.roster.roles and rcpts and p.get(FORWARD_HEADER) is None:  # a forward is no conversation
            ours = conversation.find(
                app, [*([p.message_id] if p.message_id else []), *p.references, *p.in_reply_to_ids]
            )
            if ours is not None:  # a response, or a role's reply in a thread we have: the same conversation
                conversation.add_id(ours, p.message_id or "")
            else:
                conversation.start(
                    app,
                    p.message_id or "",
                    sender_role,
                    rcpts[0],
                    p.subject or "",
                    body_text(raw, p),
                    p.get("Date") or "",
                )
        sent += 1
        say(f"outbound: submitted {p.message_id} to {', '.join(rcpts)}")
    return sent


def run(app: App, s: GmailConfig, say: Callable[[str], None], stop: Callable[[], bool], dry_run: bool = False) -> None:
    """Cycle until ``stop``; between cycles wait poll_interval (IMAP errors are logged, then retried)."""
    while not stop():
        try:
            cycle(app, s, say, dry_run)
            if s.idle:
                with Imap(s) as imap:
                    if "IDLE" in imap.caps:
                        imap.select("INBOX")
                        if imap.idle(s.poll_interval, stop):
                            say("IDLE: new mail")
                        continue
        except BridgeError as e:
            say(f"warning: {e}; retrying in {s.poll_interval:.0f}s")
        end = time.monotonic() + s.poll_interval
        while time.monotonic() < end and not stop():
            time.sleep(min(1.0, s.poll_interval))
