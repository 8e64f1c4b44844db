"""Owns guest discovery over a host's SSH login with `pvesh`, the CLI of the Proxmox API.

`pvesh get /nodes/NODE/lxc|qemu --output-format json` gives names, tags and templates without
an API token (it runs as the login, which pct already needs to be root). Any failure (no
pvesh, another node name, sudo refusing) returns None so that the caller falls back to
`pct list` / `qm list`, whose own failures are worded by their transports.
"""

from __future__ import annotations

from fleetcheck.inventory.listings import parse_pvesh_json
from fleetcheck.inventory.model import DiscoveredContainer, HostSpec
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.pct import sudo_prefix

#: PVE's own name for a guest without one (pve-container vmstatus, QemuServer vmstatus).
DEFAULT_NAMES = {"lxc": "CT{vmid}", "qemu": "VM {vmid}"}


def pvesh_argv(host: HostSpec, kind: str) -> list[str]:
    """NODE is `api.node` when set, else the host's name."""
    node = (host.api.node if host.api is not None else None) or host.name
    return [*sudo_prefix(host.sudo), "pvesh", "get", f"/nodes/{node}/{kind}",
            "--output-format", "json"]


async def pvesh_list(
    host: HostSpec, transport: Transport, kind: str, timeout: float
) -> list[DiscoveredContainer] | None:
    """The `kind` guests ("lxc" or "qemu") pvesh lists on `host`, or None when it cannot.

    Output that is JSON but not a list of guests raises DiscoveryError (pvesh answered, and
    not what it should): that is not a case for the fallback to hide.
    """
    argv = pvesh_argv(host, kind)
    result = await transport.run(argv, timeout=timeout)
    if result.returncode != 0 or result.timed_out or result.truncated or result.signal:
        return None
    listing = "pvesh " + " ".join(argv[-4:-2])
    return parse_pvesh_json(result.stdout.decode("utf-8", "replace"), listing,
                            DEFAULT_NAMES[kind])
