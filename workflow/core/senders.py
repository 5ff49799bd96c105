"""Senders: how every reader names who sent a message, or whom it is for — a role only for its own address.

The readers show a role by name (``from spec-reviewer``). Taking the local part of whatever
address a message names would show mail from ``spec-reviewer@evil.example`` as from
spec-reviewer; here only an address of the workflow's own domain is named by its local part, any
other by the whole address. Start-up time: this module imports nothing (the short commands use it).
"""

from __future__ import annotations


def local_part(address: str, domain: str) -> str | None:
    """The local part of an address of the workflow's ``domain`` (a role, a panel, a member), or
    None for an address anywhere else: ``spec-reviewer@evil.example`` is nobody of ours."""
    local, at, host = address.rpartition("@")
    return local if at and local and host.lower() == domain.lower() else None


def who(address: str, domain: str) -> str:
    """How every reader names a sender or a recipient: the role for the workflow's own address,
    the whole address for any other (so outside mail is never listed as from a role)."""
    return local_part(address, domain) or address
