"""A whole Proxmox VE cluster from one API URL: its nodes, their addresses, what a token sees.

`GET /cluster/status` lists every node with the address corosync knows it by (`ip`) and
whether it is online; `GET /cluster/resources?type=vm` says whether the token sees any
guest at all. Proxmox leaves out the guests a token may not audit instead of refusing
(pve-manager API2/Cluster.pm `resources`: `next if !$rpcenv->check(..., 'VM.Audit', 1)`),
so zero guests is read against `GET /access/permissions` to name the missing privilege.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.model import ApiOptions
from fleetcheck.inventory_data.pveapi import (
    GUEST_PRIVILEGE,
    api_client,
    call_api,
    missing_guest_privilege,
    read_token_secret,
)

#: What a read-only audit needs of the nodes, beside the guests' `GUEST_PRIVILEGE`.
NODE_PRIVILEGE = "Sys.Audit"


@dataclass(frozen=True)
class ClusterNode:
    """A node of the cluster as /cluster/status reports it."""

    name: str
    #: The address corosync knows the node by; None when the API did not say.
    ip: str | None
    online: bool


@dataclass(frozen=True)
class ClusterView:
    """What one API URL says of the whole cluster."""

    name: str
    nodes: tuple[ClusterNode, ...]
    #: One line each: privileges the token lacks, and what the audit then cannot see.
    warnings: tuple[str, ...] = ()


def read_cluster(api: ApiOptions, label: str) -> ClusterView:
    """The cluster behind `api.url`; DiscoveryError (one line, never the secret) if it fails.

    `label` names the source in messages ("sources[0]").
    """
    secret = read_token_secret(api, label)
    client = api_client(api, secret, label)
    token = f"{api.user}!{api.token_name}"
    warnings: list[str] = []

    def fetch(request: Any, privilege: str) -> Any:
        return call_api(api, secret, label, request, forbidden=(
            f"it needs {privilege}: pveum acl modify / -token '{token}' -role PVEAuditor"))

    try:
        status = fetch(lambda: client.cluster.status.get(), f"{NODE_PRIVILEGE} on /")
        nodes, name = nodes_from_status(status, label)
    except DiscoveryError as exc:
        if " 403 " not in f" {exc} ":
            raise
        # Without Sys.Audit on / the status is refused, /nodes still lists the nodes the
        # token may see: their names stand for their addresses.
        listed = fetch(lambda: client.nodes.get(), f"{NODE_PRIVILEGE} on /nodes")
        nodes, name = nodes_from_listing(listed, label), ""
        warnings.append(f"{label}: Proxmox API {api.url}: token {token} lacks "
                        f"{NODE_PRIVILEGE} on / (GET /cluster/status refused): node addresses "
                        "are their names; grant: pveum acl modify / -token "
                        f"'{token}' -role PVEAuditor")
    resources = fetch(lambda: client.cluster.resources.get(type="vm"),
                      f"{GUEST_PRIVILEGE} on /vms")
    guests = [row for row in resources if isinstance(row, dict)
              and row.get("type") in ("lxc", "qemu")] if isinstance(resources, list) else []
    if not guests:
        permissions = fetch(lambda: client.access.permissions.get(), "nothing more")
        missing = missing_guest_privilege(permissions)
        if missing:
            warnings.append(f"{label}: Proxmox API {api.url}: token {token} sees no guests: "
                            f"{missing} (Proxmox leaves out what a token may not audit); "
                            f"grant: pveum acl modify /vms -token '{token}' -role PVEAuditor")
    return ClusterView(name, nodes, tuple(warnings))


def nodes_from_status(rows: Any, label: str) -> tuple[tuple[ClusterNode, ...], str]:
    """The node rows of /cluster/status (sorted by name) and the cluster's name."""
    if not isinstance(rows, list):
        raise DiscoveryError(f"{label}: unexpected Proxmox API answer for /cluster/status",
                             host=label)
    name = ""
    nodes: list[ClusterNode] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        if row.get("type") == "cluster":
            name = str(row.get("name") or "")
        elif row.get("type") == "node" and isinstance(row.get("name"), str):
            ip = row.get("ip")
            nodes.append(ClusterNode(row["name"], ip if isinstance(ip, str) and ip else None,
                                     bool(row.get("online"))))
    return tuple(sorted(nodes, key=lambda n: n.name)), name


def nodes_from_listing(rows: Any, label: str) -> tuple[ClusterNode, ...]:
    """The nodes of GET /nodes (no addresses there)."""
    if not isinstance(rows, list):
        raise DiscoveryError(f"{label}: unexpected Proxmox API answer for /nodes", host=label)
    return tuple(sorted((ClusterNode(str(row["node"]), None, row.get("status") == "online")
                         for row in rows if isinstance(row, dict) and row.get("node")),
                        key=lambda n: n.name))
