"""The LXC container kind: `HOST/VMID` under a Proxmox host's `containers:`, reached with
`pct exec` through the host's transport (`transport/pct.py`, which words pct's refusals),
listed with `pct list` when neither the API nor pvesh answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetcheck.inventory.listings import parse_pct_list
from fleetcheck.inventory.model import DiscoveredContainer, HostSpec, Target
from fleetcheck.kinds.proxmox import ProxmoxGuestKind
from fleetcheck.transport.pct import PctTransport, pve_list_argv

if TYPE_CHECKING:
    from fleetcheck.budget import BudgetFor
    from fleetcheck.model import NodeResult
    from fleetcheck.transport.interface import Transport


def pct_list_argv(host: HostSpec) -> list[str]:
    """The command that lists a host's containers."""
    return pve_list_argv("pct", sudo=host.sudo)


class LxcKind(ProxmoxGuestKind):
    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        del budget  # pct exec has no wait of its own: the host transport's bounds it
        assert target.vmid is not None
        host = target.host
        return PctTransport(outer, target.vmid, sudo=host.sudo, host_name=host.name)

    def where_it_runs(self, node: NodeResult) -> str:
        return (f"inside LXC container {node.vmid} on {node.host}, as root, "
                f"through `pct exec {node.vmid}`")

    def describe(self, target: Target) -> str | None:
        return f"name={target.name}" if target.name != target.id else None


LXC = LxcKind("lxc", key="containers", noun="container", default_name="CT{vmid}", tool="pct",
              parse_listing=parse_pct_list)


async def pct_list(host: HostSpec, transport: Transport) -> list[DiscoveredContainer]:
    """The containers `pct list` shows on `host`; DiscoveryError saying why when it fails."""
    return await LXC.tool_list(host, transport)
