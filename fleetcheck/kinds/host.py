"""The host kind: the machine in the inventory itself (a Proxmox host, any SSH host, or the
machine fleetcheck runs on), the root of every node tree.

Its transport is the one `TransportFactory.for_host` opens (SSH, local, or the Proxmox API for
a `transport: api` host); its refusals are the host's gatekeeper's (`transport/ssh.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fleetcheck.inventory.model import Target
from fleetcheck.kinds.base import NodeKind, Nodes

if TYPE_CHECKING:
    from fleetcheck.model import NodeResult
    from fleetcheck.transport.interface import Transport


class HostKind(NodeKind):
    name = "host"
    runs_in = ()
    depth = 0

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        del parent
        return None  # a host is declared by `hosts:` itself, never under another node

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        del parent, listing
        return []

    def transport(self, target: Target, outer: Transport) -> Transport:
        del target
        return outer

    def inside(self, target: Target) -> str:
        return f"on {target.host.name}"

    def where_it_runs(self, node: NodeResult) -> str:
        return f"on {node.host} itself, over SSH as the inventory's login (`sudo -n` when set)"

    def describe(self, target: Target) -> str | None:
        return "(the host itself)"


HOST = HostKind()
