"""From a host to its nodes, before or after discovery: the node kinds' expansion, applied.

Each kind expands its own nodes (`fleetcheck/kinds/`); this module only starts from the host
and hands the listings in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleetcheck import kinds
from fleetcheck.inventory_data.listings import discovered_vmid, parse_pct_list
from fleetcheck.inventory_data.model import (
    DiscoveredContainer,
    HostSpec,
    SkippedTarget,
    Target,
)
from fleetcheck.kinds.proxmox import ProxmoxGuestKind

__all__ = [
    "discovered_vmid",
    "host_nodes",
    "needs_discovery",
    "parse_pct_list",
    "static_targets",
    "targets_for_host",
]


def host_nodes(
    host: HostSpec, listings: Mapping[str, Sequence[Any] | None] | None = None
) -> list[Target | SkippedTarget]:
    """The nodes of `host`: the host itself (probe_host), then each node under it followed by
    its own, kind by kind in registry order.

    `listings` maps a kind to its listing on the host (what the kind's `discover` returned):
    running guests are probed, templates and stopped ones become skipped nodes, and a
    listing line discovery could not read becomes an error node. Without a listing only the
    declared nodes are known ("all" raises for Proxmox guests, and gives nothing yet for
    Docker/Podman containers). Python, env, labels and timeout inherit defaults -> host ->
    guest, and defaults -> host -> OCI container (an image does not see its guest's
    interpreter); labels and timeout also guest -> OCI container.
    """
    root = kinds.host_target(host)
    given = listings or {}

    def listing(parent: Target, kind: kinds.NodeKind) -> Sequence[Any] | None:
        return given.get(kind.name) if parent is root else None

    return [*([root] if host.probe_host else []), *kinds.expand(root, listing)]


def static_targets(host: HostSpec) -> list[Target]:
    """The nodes known without connecting: the host itself, listed guests and containers."""
    root = kinds.host_target(host)

    def unlisted(parent: Target, kind: kinds.NodeKind) -> list[Any] | None:
        return [] if kind.needs_listing(parent) else None

    nodes = [*([root] if host.probe_host else []), *kinds.expand(root, unlisted)]
    return [t for t in nodes if isinstance(t, Target)]


def targets_for_host(
    host: HostSpec,
    discovered: Sequence[DiscoveredContainer] | None,
    vms: Sequence[DiscoveredContainer] | None = None,
) -> list[Target | SkippedTarget]:
    """`host_nodes` given a Proxmox host's two listings, its containers' (`discovered`) and
    its VMs' (`vms`): the listings of the registry's Proxmox guest kinds, in its order."""
    guests = [kind.name for kind in kinds.all_kinds() if isinstance(kind, ProxmoxGuestKind)]
    return host_nodes(host, dict(zip(guests, (discovered, vms), strict=True)))


def needs_discovery(host: HostSpec) -> bool:
    """Whether some of `host`'s nodes are known only after a listing runs on it."""
    return kinds.needs_listing(host)
