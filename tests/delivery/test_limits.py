"""Resource limits against hostile clients: command lines never buffer more than a small bound,
and a client that half-closes after the final dot still hears its 250."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from helpers.project import Project
from helpers.smtp import auth_plain, message, server_process


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_unterminated_command_lines_do_not_grow_the_server(project: Project) -> None:
    with server_process(project.dir) as (proc, port):
        time.sleep(0.5)
        before = rss_kib(proc.pid)
        socks = []
        chunk = b"A" * (1 << 20)
        for _ in range(10):  # 10 connections × 6 MiB of one command line, never terminated
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.recv(1024)
            for _ in range(6):
                s.sendall(chunk)
            socks.append(s)
        time.sleep(1.0)
        grown = rss_kib(proc.pid) - before
        for s in socks:
            s.sendall(b"\r\n")
            assert s.recv(1024).startswith(b"500 Command line too long")
            s.close()
        assert grown < 40 * 1024, f"the server grew by {grown} KiB"
        long_mail = b"MAIL FROM:<" + b"a" * 600 + b"@workflow.local>\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            greeting = s.recv(1024)
            s.sendall(b"EHLO x\r\n" + auth_plain(greeting) + long_mail)
            time.sleep(0.5)
            assert b"500 Command line too long" in s.recv(65536)


def test_a_half_close_after_the_final_dot_still_gets_the_250(project: Project) -> None:
    with server_process(project.dir) as (_, port):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        greeting = s.recv(1024)
        s.sendall(
            b"EHLO x\r\n"
            + auth_plain(greeting)
            + b"MAIL FROM:<spec-writer@workflow.local>\r\nRCPT TO:<spec-reviewer@workflow.local>\r\nDATA\r\n"
            + message()
            + b".\r\n"
        )
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            got = s.recv(65536)
            if not got:
                break
            out += got
        s.close()
    assert b"250 2.0.0" in out.split(b"\r\n354 ")[-1], out  # the reply code, not "354" inside a Message-ID
    assert len(project.new_files("spec-reviewer")) == 1
