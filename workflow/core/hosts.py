"""Hosts: the machines a team's roles live on — ``[hosts.NAME]`` tables, and which one this is.

Every host has the same ``workflow.toml`` and ``roles/``. A role (``host = "NAME"`` in its front
matter) lives on one host; a role that names none lives on the first host the file lists, so
every host agrees where each role is. Which host *this* machine is comes from the owner's state
directory (``<mail root>/.workflow/host``, written by ``workflow host NAME``), never from a file
in the tree, which an agent can edit. Without ``[hosts]`` there is one host and no name to give.

Each host's listeners bind its ``address``: its ``workflow smtpd`` (people, runs and peers,
on ``[smtp] port``) and its cockpit (``[web] port``), so several hosts can share one machine.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, NamedTuple

from workflow.core.errors import ConfigError
from workflow.core.schema import NAME_RE, Fixed, Int, Section, Str, read, suggest, where

ADDRESS_RE = re.compile(r"^[A-Za-z0-9.:-]{1,253}$")  # an IP address or a host name


class HostConfig(NamedTuple):
    """``[hosts.NAME]``: one host of the team's."""

    name: Annotated[str, Fixed()]
    address: Annotated[str, Str(ADDRESS_RE)]  # what its listeners bind, and where peers reach them
    # its Postfix instance's port on loopback, where its smtpd hands the copies for other hosts
    relay_port: Annotated[int, Int(1, 65535)] = 10025

    @property
    def loopback(self) -> bool:
        """Whether its address is a loopback one (hosts sharing one machine, as tests make them)."""
        import ipaddress  # lazy: start-up time; only a configured host asks

        try:
            return ipaddress.ip_address(self.address).is_loopback
        except ValueError:
            return self.address == "localhost"

    @property
    def relay_address(self) -> str:
        """Where its Postfix instance listens for its smtpd: loopback only (its own address when
        that is a loopback one, so hosts sharing a machine each have theirs)."""
        return self.address if self.loopback else "127.0.0.1"


HOST = Section(HostConfig)


def read_hosts(file: str, table: object) -> tuple[HostConfig, ...]:
    """``[hosts]``: each ``[hosts.NAME]`` table, in the file's order (the first is where a role
    that names no host lives)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where(file, 'hosts')}: expected a table of [hosts.NAME] tables, got {table!r}")
    out = []
    for name, sub in table.items():
        if not NAME_RE.match(name):
            raise ConfigError(f"{where(file, f'hosts.{name}')}: a host name must match {NAME_RE.pattern}")
        out.append(read(file, f"hosts.{name}", sub, HOST, name=name))
    seen: dict[str, str] = {}
    for h in out:
        if h.address in seen:
            raise ConfigError(
                f"{where(file, f'hosts.{h.name}', 'address')}: {h.address} is host {seen[h.address]}'s already; "
                "each host binds an address of its own"
            )
        seen[h.address] = h.name
    return tuple(out)


def identity(file: str, hosts: tuple[HostConfig, ...], path: Path, given: str | None = None) -> str:
    """Which of ``hosts`` this machine is: ``given``, else what its state directory says (""
    when there are no hosts, or when none was chosen yet: ``chosen`` refuses that where it matters)."""
    said = f"{path}: this machine is host" if given is None else "host"
    if given is None and not hosts:
        return ""  # one host: nothing to read
    if given is not None:
        name = given
    else:
        try:
            name = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read which host this is: {e}") from None
    if not name:
        return ""
    names = [h.name for h in hosts]
    if name not in names:
        listed = f"expected one of {', '.join(names)}" if names else "it has no [hosts.NAME] table"
        raise ConfigError(
            f"{said} {name!r}, which {file} does not list{suggest(name, names)}; {listed} (`workflow host NAME` sets it)"
        )
    return name


def chosen(file: str, hosts: tuple[HostConfig, ...], this: str) -> str:
    """This host's name; refused, saying how to set it, where ``[hosts]`` lists hosts and this
    machine has not said which it is."""
    if hosts and not this:
        raise ConfigError(
            f"{file} lists hosts ({', '.join(h.name for h in hosts)}) and this machine has not said which "
            "it is: run `workflow host NAME` here"
        )
    return this
