#!/usr/bin/env python3
"""Baseline for scripts/bench/ingest: a bare aiosmtpd server whose handler only calls stdlib
``mailbox.Maildir.add`` (no validation, no index, no directory fsync). Prints its port, serves
until SIGTERM. Usage: bare_aiosmtpd.py MAIL_ROOT"""

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


async def main() -> None:
    root = Path(sys.argv[1])
    handler = Handler(root)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(handler, hostname="bare", loop=loop), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


asyncio.run(main())
