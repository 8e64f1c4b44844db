"""The host kind: the machine in the inventory itself (a Proxmox host, any SSH host, or the
machine fleetcheck runs on), the root of every node tree.

Its transport is the one `TransportFactory.for_host` opens (SSH, local, or the Proxmox API for
a `transport: api` host); its refusals are the host's gatekeeper's (`transport/ssh.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fleetcheck.inventory_data.model import Target
from fleetcheck.kinds.base import GatekeeperWrapper, NodeKind, Nodes

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.report.content import NodeResult
    from fleetcheck.transport.interface import Transport


class HostKind(NodeKind):
    name = "host"
    runs_in = ()
    depth = 0
    # A command on the host runs as the inventory's login, or under `sudo -n` (`sudo: true`).
    # The host's own probe, as the login only, and the clean-up are the gatekeeper script's.
    gatekeeper_wrapper = GatekeeperWrapper("", [("ref", "sudo")], probe=None)

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        del parent
        return None  # a host is declared by `hosts:` itself, never under another node

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        del parent, listing
        return []

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        del target, budget
        return outer

    def inside(self, target: Target) -> str:
        return f"on {target.host.name}"

    def where_it_runs(self, node: NodeResult) -> str:
        found = probe_place(node)
        if found is not None:
            # A node document (`fleetcheck probe` run by a timer, a job, a pod): the probe's
            # own signs say what it is in.
            return (f"on {node.host}, which the probe found to be inside a {found} "
                    "(its own signs: facts.where)")
        return f"on {node.host} itself, over SSH as the inventory's login (`sudo -n` when set)"

    def describe(self, target: Target) -> str | None:
        return "(the host itself)"


#: The probe's facts.where.kind words for the places a `host` node can turn out to be.
_PLACES = {"lxc": "LXC container", "docker": "Docker container", "podman": "Podman container",
           "kubernetes": "Kubernetes pod"}


def probe_place(node: NodeResult) -> str | None:
    """What the probe found a `host` node to be inside (an LXC, Docker or Podman container, a
    Kubernetes pod), from facts.where; None for a host, a VM or bare metal."""
    where = node.facts.get("where")
    kind = where.get("kind") if isinstance(where, dict) else None
    return _PLACES.get(kind) if isinstance(kind, str) else None


HOST = HostKind()
