"""Roster: who an address reaches and who may write to it (roles, panels, panel spaces).

Address kinds (domain from config):
  role        ``spec-reviewer@``                     → mailbox ``spec-reviewer``
  panel       ``spec-reviewer-panel@``               → every member's mailbox
  member      ``spec-reviewer-panel.claude@``        → that member's mailbox
  internal    ``spec-reviewer-panel-internal@``      → panel members only; only members may send
              ``spec-writer-panel-internal@``
  discussion  ``spec-discussion@``                   → both panels of the kind (or the solo roles)
  bridge      ``slack@``, ``slack+TAG@``             → mailbox ``bridge-slack`` (a configured bridge's own:
              one address per outside conversation, TAG naming it; only the owner sends as one)
  external    anything outside the domain            → an outbound bridge, or refused
The table is data: ``workflow roster`` prints it, ``workflow route ADDRESS`` explains one match.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import NamedTuple

from workflow.core.addresses import (
    SIDES,
    PanelName,
    discussion_address,
    internal_address,
    parse_discussion,
    parse_internal,
    solo_kind,
)
from workflow.core.config import Config, PanelConfig
from workflow.core.errors import RosterError
from workflow.policy.roles import Role, load_roles

OUTBOUND_SPOOL = "bridge-outbound"
BRIDGE_TAG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")


def bridge_mailbox(name: str) -> str:
    """The mailbox a bridge's addresses deliver into (``bridge-slack``)."""
    return f"bridge-{name}"


class Route(NamedTuple):
    """What one address means: its kind, the mailboxes it reaches, and who may send to it."""

    address: str
    kind: str
    mailboxes: tuple[str, ...]
    explanation: str
    space: str | None = None  # the internal space an internal address belongs to
    senders: tuple[str, ...] = ()  # identities allowed to send; empty means anyone in the roster


class Decision(NamedTuple):
    """Whether a sender may write to an address, and why; a refusal names the rule that refused."""

    allowed: bool
    reason: str
    rule: str = ""  # set when refused


MEMBERS_ONLY = "internal-members-only"  # the rule a refused Decision names (listed in policy.visibility)


def outbound_bridge(config: Config) -> str:
    """The bridge that carries mail out of the domain: the first configured ``[bridges.NAME]`` section
    with ``outbound = true`` ("" when none); what it sends is the OUTBOUND_SPOOL mailbox (``bridges.base``)."""
    for name, section in config.bridges.items():
        if getattr(section, "outbound", False) is True:
            return str(name)
    return ""


class Roster:
    """Roles and panels resolved into addresses; built once at the entry point."""

    def __init__(
        self,
        domain: str,
        roles: Mapping[str, Role],
        panels: tuple[PanelConfig, ...],
        outbound: str | None = None,
        bridges: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
    ) -> None:
        self.domain = domain
        self.hosts = hosts  # [hosts.NAME] in the file's order: a role naming none lives on the first
        self.bridges = bridges  # the configured bridges: each has its addresses and its mailbox
        self.outbound = outbound  # a spool mailbox for mail leaving the domain (an outbound bridge's)
        self.roles = roles
        self.panels = {p.name: p for p in panels}
        self.members: dict[str, PanelConfig] = {}
        for p in panels:
            for mb in p.mailboxes:
                self.members[mb] = p
        clash = set(self.roles) & (set(self.panels) | set(self.members))
        clash |= {*self.roles, *self.panels, *self.members} & {*bridges, *map(bridge_mailbox, bridges)}
        if clash:
            raise RosterError(f"names used both by a role and a panel: {', '.join(sorted(clash))}")

    @classmethod
    def load(cls, config: Config) -> Roster:
        outbound = OUTBOUND_SPOOL if outbound_bridge(config) else None
        hosts = tuple(h.name for h in config.hosts)
        return cls(config.domain, load_roles(config), config.panels, outbound, tuple(config.bridges), hosts)

    def host_of(self, name: str) -> str:
        """The host a role, panel or panel member's mailbox lives on ("" when there are no hosts):
        its own ``host``, else its panel's, else the first host."""
        if not self.hosts:
            return ""
        home = self.hosts[0]
        if name in self.members:
            panel = self.members[name]
            member = next(m for m in panel.members if panel.mailbox(m.name) == name)
            return member.host or home
        if name in self.roles:
            return self.roles[name].host or home
        return home

    # ------------------------------------------------------------------ names

    def local_part(self, address: str) -> tuple[str, str]:
        """(local part, domain) of an address or a bare name (which gets the workflow domain)."""
        a = address.strip().strip("<>").lower()
        if "@" in a:
            local, _, dom = a.rpartition("@")
            return local, dom
        return a, self.domain

    def bridge_of(self, address: str) -> str:
        """The bridge an address (or a bare local part) of this domain belongs to ("" for none):
        ``slack`` for ``slack@`` and ``slack+c1-100-1@``."""
        local, dom = self.local_part(address)
        if dom != self.domain:
            return ""
        name, plus, tag = local.partition("+")
        if name in self.bridges and (not plus or BRIDGE_TAG.match(tag)):
            return name
        return ""

    def address(self, name: str) -> str:
        local, dom = self.local_part(name)
        return f"{local}@{dom}"

    def identities(self) -> list[str]:
        """Every name that can send mail: roles that take mail, panels, panel members."""
        return sorted([r.name for r in self.roles.values() if r.takes_mail] + list(self.panels) + list(self.members))

    def known_locals(self) -> list[str]:
        names = set(self.identities()) | set(self.bridges)
        for p in self.panels.values():
            names.add(internal_address(p.name))
            names.add(discussion_address(p.artifact_kind))
        for r in self.roles.values():
            kind = solo_kind(r.name)
            if kind:
                names.add(discussion_address(kind))
        return sorted(names)

    def suggest(self, local: str) -> str:
        close = difflib.get_close_matches(local, self.known_locals(), n=3, cutoff=0.5)
        if not close:
            return ""
        return "; did you mean " + ", ".join(f"{c}@{self.domain}" for c in close) + "?"

    def to_dict(self) -> dict[str, object]:
        """Every role, panel and address, and the mailboxes each address reaches (``--json``)."""
        return {
            "domain": self.domain,
            "roles": [
                {
                    "name": r.name,
                    "mode": r.mode,
                    "triggers": list(r.triggers),
                    "hands_off": list(r.hands_off),
                    "description": r.description,
                    **({"host": self.host_of(r.name)} if self.hosts else {}),
                }
                for r in self.roles.values()
            ],
            "panels": [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "members": [m.name for m in p.members],
                    "mailboxes": list(p.mailboxes),
                    **({"hosts": {m.name: self.host_of(p.mailbox(m.name)) for m in p.members}} if self.hosts else {}),
                }
                for p in self.panels.values()
            ],
            "addresses": [
                {"address": r.address, "kind": r.kind, "mailboxes": list(r.mailboxes)}
                for r in map(self.route, self.known_locals())
            ],
        }

    def reviewer_of(self, kind: str) -> str:
        """Who reviews an artifact kind: its review panel when one is configured, else the solo reviewer."""
        panel = PanelName(kind, "reviewer").name
        return panel if panel in self.panels else f"{kind}-reviewer"

    def hands_off(self, identity: str) -> tuple[str, ...]:
        """The roles ``identity``'s approval goes on to when it names no NEXT_ROLES: its role file's
        ``hands_off``. A review panel hands off as the solo reviewer it stands for
        (``spec-reviewer-panel`` as ``spec-reviewer``), a member as its panel. A name that is no
        role taking mail is refused, naming the file and the name."""
        panel = self.panels.get(identity) or self.members.get(identity)
        name = f"{panel.artifact_kind}-reviewer" if panel is not None and panel.kind == "review" else identity
        role = self.roles.get(name) if name in self.roles else None
        if role is None:
            return ()
        for h in role.hands_off:
            if h not in self.roles and h not in self.panels:
                raise RosterError(f"{role.path}: front matter key hands_off: unknown role {h!r}{self.suggest_names(h)}")
            if h in self.roles and not self.roles[h].takes_mail:
                raise RosterError(
                    f"{role.path}: front matter key hands_off: role {h} is a sync helper role and takes no mail"
                )
        return role.hands_off

    def suggest_names(self, name: str) -> str:
        """``; did you mean a, b?`` over role, panel and member names (where a name is expected)."""
        names = sorted({*self.roles, *self.panels, *self.members})
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        return (
            "; did you mean " + ", ".join(close) + "?" if close else f"; `workflow roster` lists the {len(names)} roles"
        )

    def identity(self, name: str) -> str:
        """A role, panel or member given by name (``--as``, run-role, agentd resume): itself, or a
        refusal that names it as a role and suggests roles."""
        if "@" in name:
            return self.sender(name)
        found = self._identity(name)
        if found is None:
            raise RosterError(f"unknown role {name!r}{self.suggest_names(name)}")
        return found

    def _identity(self, local: str) -> str | None:
        """``local`` when it names a role that takes mail, a panel or a member; None when it names
        nothing; refused for a sync helper role."""
        if local in self.roles:
            if not self.roles[local].takes_mail:
                raise RosterError(f"role {local} is a sync helper role: it never sends or reads mail")
            return local
        if self.bridge_of(local):
            return local  # the owner's bridge, for one outside conversation
        return local if local in self.panels or local in self.members else None

    def sender(self, address: str) -> str:
        """The identity behind a From address; refuses strangers and sync roles."""
        local, dom = self.local_part(address)
        if dom != self.domain:
            raise RosterError(f"sender {address!r} is outside {self.domain}")
        found = self._identity(local)
        if found is None:
            raise RosterError(f"unknown sender role {local!r}{self.suggest(local)}")
        return found

    def mailboxes_of(self, identity: str) -> tuple[str, ...]:
        """The mailboxes an identity reads (a panel reads through its members)."""
        if identity in self.panels:
            return self.panels[identity].mailboxes
        if identity in self.roles or identity in self.members:
            return (identity,)
        bridge = self.bridge_of(identity)
        if bridge:
            return (bridge_mailbox(bridge),)
        raise RosterError(f"unknown role {identity!r}{self.suggest_names(identity)}")

    def view(self, identity: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What an identity may see: (its mailboxes, the addresses whose sent mail is its own)."""
        boxes = self.mailboxes_of(identity)
        names = {identity, *boxes}
        return boxes, tuple(sorted(f"{n}@{self.domain}" for n in names))

    # ------------------------------------------------------------------ routing

    def route(self, address: str) -> Route:
        """Resolve one address; unknown local addresses are an error naming the nearest ones."""
        local, dom = self.local_part(address)
        addr = f"{local}@{dom}"
        if dom != self.domain:
            if self.outbound:
                return Route(
                    addr,
                    "external",
                    (self.outbound,),
                    f"outside {self.domain} → the outbound bridge's spool {self.outbound}/",
                )
            return Route(addr, "external", (), f"outside {self.domain}: only an outbound bridge may take it")
        if local in self.roles:
            role = self.roles[local]
            if not role.takes_mail:
                raise RosterError(f"{addr}: role {local} is a sync helper role and takes no mail")
            return Route(addr, "role", (local,), f"role {local} ({role.mode}) → mailbox {local}/")
        if local in self.members:
            p = self.members[local]
            return Route(addr, "member", (local,), f"member of panel {p.name} → mailbox {local}/")
        if local in self.panels:
            p = self.panels[local]
            return Route(
                addr, "panel", p.mailboxes, f"panel {p.name} ({p.kind}) → each member: " + ", ".join(p.mailboxes)
            )
        bridge = self.bridge_of(addr)
        if bridge:
            box = bridge_mailbox(bridge)
            return Route(addr, "bridge", (box,), f"the {bridge} bridge → mailbox {box}/ (back to the outside)")
        internal_of = parse_internal(local)
        if internal_of:
            panel = self.panels.get(internal_of)
            if panel is not None:
                senders = panel.mailboxes + (panel.name,)
                return Route(
                    addr,
                    "internal",
                    panel.mailboxes,
                    f"internal space of {panel.name}: members only ({', '.join(panel.mailboxes)}); "
                    "only members may send; replies stay inside",
                    space=local,
                    senders=senders,
                )
        kind = parse_discussion(local)
        if kind:
            boxes: list[str] = []
            parts: list[str] = []
            for side in SIDES:
                panel = self.panels.get(f"{kind}-{side}-panel")
                if panel is not None:
                    boxes.extend(panel.mailboxes)
                    parts.append(f"{panel.name} members")
                elif f"{kind}-{side}" in self.roles:
                    boxes.append(f"{kind}-{side}")
                    parts.append(f"role {kind}-{side}")
            if boxes:
                return Route(
                    addr,
                    "discussion",
                    tuple(boxes),
                    f"cross-panel discussion for {kind}: {' and '.join(parts)}; new threads only",
                )
        raise RosterError(f"unknown address {addr}{self.suggest(local)}")

    def may_send(self, sender: str, route: Route) -> Decision:
        """Whether ``sender`` may write to ``route``, with the reason either way."""
        if route.kind == "internal":
            if sender in route.senders:
                return Decision(True, f"{sender} is a member of {route.space}")
            return Decision(
                False,
                f"{route.address} is internal to a panel; only {', '.join(route.senders)} may send to it, not {sender}",
                MEMBERS_ONLY,
            )
        return Decision(True, f"{route.kind} addresses take mail from any role")
