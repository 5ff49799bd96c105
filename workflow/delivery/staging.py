"""Staging: a run's directory as delivery sees it — its state, its token, the mail it holds back.

A run of a role (``agents.txn``) owns ``<state>/runs/ROLE.run/``: ``run.json`` (the run's state
and its token's SHA-256) and ``outbox/`` (each message the run sent, checked and held until the
run succeeds). Both run-role and the SMTP server write here — the server stages what a run's
agent submits with its run credential — so a message is staged only while the run is open, and
the run leaves the open state under the same lock (``flock`` on ``run.lock``): a message is
either in the outbox before the run's commit lists it, or refused.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from workflow.core.errors import ToolError
from workflow.core.files import write_atomic

OPEN, COMMITTING, ROLLING_BACK = "open", "committing", "rolling-back"


class Staged(NamedTuple):
    path: Path
    message_id: str
    sender: str
    recipients: tuple[str, ...]
    what: str
    raw: bytes


def describe(event: str | None, artifacts: Sequence[str]) -> str:
    """How a staged message is named in what a run says (``answer for specs/*/user-auth.md``)."""
    return f"{event or 'mail'}" + (f" for {artifacts[0]}" if artifacts else "")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class RunBox:
    """One run's directory: its state, token and staged mail."""

    def __init__(self, path: Path) -> None:
        self.dir = path
        self.outbox = path / "outbox"

    def info(self) -> dict[str, object]:
        try:
            data = json.loads((self.dir / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def role(self) -> str:
        return str(self.info().get("role", ""))

    def is_open(self) -> bool:
        return self.info().get("state") == OPEN

    def write_info(self, info: dict[str, object]) -> None:
        write_atomic(self.dir / "run.json", json.dumps(info), mode=0o600)

    @contextmanager
    def locked(self) -> Iterator[None]:
        fd = os.open(self.dir / "run.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def leave_open(self, state: str) -> dict[str, object]:
        """End the open state (the token dies, nothing more is staged); returns the run's info."""
        with self.locked():
            info = self.info()
            if info and info.get("state") != state:
                self.write_info({**info, "state": state})
        return info

    def key(self) -> str | None:
        """The digest of this open run's token (the key of its ``X-WORKFLOW`` login); None when
        the run is not open."""
        info = self.info()
        digest = info.get("token_sha256")
        return digest if info.get("state") == OPEN and isinstance(digest, str) and len(digest) == 64 else None

    def stage(self, raw: bytes, sender: str, recipients: Sequence[str], message_id: str, what: str) -> Path:
        """Keep one checked message until the run ends (the caller checked it)."""
        name = f"{time.time():.6f}.{os.getpid()}.{os.urandom(3).hex()}.json"
        path = self.outbox / name
        body = {
            "message_id": message_id,
            "sender": sender,
            "recipients": list(recipients),
            "what": what,
            "raw": base64.b64encode(raw).decode("ascii"),
        }
        with self.locked():
            if not self.is_open():
                raise ToolError("the run has ended: nothing more is sent for it")
            write_atomic(path, json.dumps(body), mode=0o600)
        return path

    def staged(self) -> list[Staged]:
        out = []
        for p in sorted(self.outbox.glob("*.json")) if self.outbox.is_dir() else []:
            try:
                d = json.loads(p.read_text(encoding="utf-8"))
                out.append(
                    Staged(
                        p,
                        str(d["message_id"]),
                        str(d["sender"]),
                        tuple(d["recipients"]),
                        str(d["what"]),
                        base64.b64decode(d["raw"]),
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a half-written file from a killed writer: it was never acknowledged
        return out
