"""Outbox: notifications that could not be sent yet, kept on disk and sent on the next run.

Git hooks and ``workflow move`` must never lose a notification (nor the user's commit) when
the mail system is down: the composed message is queued as one JSON file in the state
directory's ``outbox/`` (written whole: ``files.write_atomic``). ``flush``
sends what is queued, oldest first; a message a rule now refuses (the artifact moved again,
say) goes to ``outbox/failed/`` with the refusal, where ``workflow doctor`` reports it.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from workflow.core.config import Config
from workflow.core.errors import DeliveryError, RuleError, TransportError, WorkflowError
from workflow.core.files import write_atomic

if TYPE_CHECKING:  # a git hook asks ``waiting`` before anything may be sent
    from workflow.delivery.transport import Transport


class Queued(NamedTuple):
    path: Path
    sender: str
    recipients: tuple[str, ...]
    raw: bytes
    what: str
    error: str
    queued: float


def put(
    config: Config, raw: bytes, sender: str, recipients: Sequence[str], what: str, error: str, *, failed: bool = False
) -> Path:
    """Queue one message durably; returns its file."""
    d = config.state.outbox_failed if failed else config.state.outbox
    now = time.time()
    final = d / f"{now:.6f}.{os.getpid()}.{os.urandom(3).hex()}.json"
    body = json.dumps(
        {
            "sender": sender,
            "recipients": list(recipients),
            "what": what,
            "error": error,
            "queued": now,
            "raw": base64.b64encode(raw).decode("ascii"),
        }
    )
    write_atomic(final, body, mode=0o600)
    return final


def _load(path: Path) -> Queued | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Queued(
            path,
            str(data["sender"]),
            tuple(data["recipients"]),
            base64.b64decode(data["raw"]),
            str(data.get("what", "")),
            str(data.get("error", "")),
            float(data.get("queued", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def waiting(config: Config) -> bool:
    """Whether anything is queued to send (what ``flush`` would try)."""
    try:
        return any(e.name.endswith(".json") and e.is_file() for e in os.scandir(config.state.outbox))
    except (FileNotFoundError, NotADirectoryError):
        return False


def pending(config: Config, failed: bool = False) -> list[Queued]:
    d = config.state.outbox_failed if failed else config.state.outbox
    if not d.is_dir():
        return []
    return [q for q in (_load(p) for p in sorted(d.glob("*.json"))) if q is not None]


def flush(config: Config, transport: Transport, say: Callable[[str], None]) -> tuple[int, int]:
    """Send what is queued; returns (sent, still queued). Refused messages move to failed/."""
    sent = 0
    left = 0
    for q in pending(config):
        try:
            transport.send(q.raw, q.sender, q.recipients)
        except (TransportError, DeliveryError) as e:
            if isinstance(e, TransportError) and e.code is not None and 500 <= e.code < 600:
                _fail(config, q, str(e), say)
                continue
            left += 1
            say(f"still queued: {q.what} ({e})")
            continue
        except (RuleError, WorkflowError) as e:
            _fail(config, q, str(e), say)
            continue
        q.path.unlink(missing_ok=True)
        sent += 1
        say(f"sent queued {q.what}")
    return sent, left


def _fail(config: Config, q: Queued, error: str, say: Callable[[str], None]) -> None:
    put(config, q.raw, q.sender, q.recipients, q.what, error, failed=True)
    q.path.unlink(missing_ok=True)
    say(f"gave up on queued {q.what}: {error} (kept in {config.state.outbox_failed})")
