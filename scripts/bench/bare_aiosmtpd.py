#!/usr/bin/env python3
"""Baseline for scripts/bench/ingest: a bare aiosmtpd server whose handler only calls stdlib
``mailbox.Maildir.add`` (no validation, no index, no directory fsync). Prints its port, serves
until SIGTERM. Usage: bare_aiosmtpd.py MAIL_ROOT [--null]

With --null: workflow smtpd's own SMTP protocol layer (aiosmtpd with workflow's DATA reader and
address fast path, ``delivery.server.protocol``) on uvloop, with a handler that stores nothing and
answers 250 at once — what the protocol alone costs per message, the floor under workflow smtpd."""

from __future__ import annotations

import asyncio
import mailbox
import signal
import sys
from pathlib import Path

from aiosmtpd.smtp import SMTP


class Handler:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.boxes: dict[str, mailbox.Maildir] = {}

    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        for rcpt in envelope.rcpt_tos:
            local = rcpt.split("@")[0]
            box = self.boxes.get(local)
            if box is None:
                box = self.boxes[local] = mailbox.Maildir(self.root / local, create=True)
            box.add(envelope.original_content)
        return "250 OK"


class Null:
    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        return "250 OK"


def workflow_protocol(loop: asyncio.AbstractEventLoop):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from workflow.delivery.server.protocol import protocol_factory
    from workflow.delivery.server.tally import Tally

    return protocol_factory(
        Null(),
        max_message_size=10 << 20,
        max_connections=64,
        gate=Tally(),
        protocols=set(),
        enable_SMTPUTF8=True,
        decode_data=False,
        hostname="null",
        loop=loop,
    )


async def main() -> None:
    root = Path(sys.argv[1])
    loop = asyncio.get_running_loop()
    if "--null" in sys.argv:
        factory = workflow_protocol(loop)
    else:
        handler = Handler(root)
        factory = lambda: SMTP(handler, hostname="bare", loop=loop)  # noqa: E731
    server = await loop.create_server(factory, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


if "--null" in sys.argv:
    import uvloop

    uvloop.run(main())
else:
    asyncio.run(main())
