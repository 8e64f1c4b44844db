"""Owns which transport and which listing each node kind uses (host, lxc, qemu, docker, podman).

An LXC container is `pct exec` on its host's transport, a VM `qm guest exec` on it (or the
API's agent endpoints for a `transport: api` host), and a Docker/Podman container the
runtime's `exec -i` on its parent's transport, whatever that parent is.
"""

from __future__ import annotations

from fleetcheck.gatekeeper import refusal_reason
from fleetcheck.inventory.errors import DiscoveryError
from fleetcheck.inventory.model import (
    ALL_CONTAINERS,
    DiscoveredContainer,
    DiscoveredOci,
    HostSpec,
    Target,
)
from fleetcheck.inventory.pveapi import discover_guests_via_api
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.oci import OciTransport, oci_list
from fleetcheck.transport.pct import PctTransport
from fleetcheck.transport.pvesh import pvesh_list
from fleetcheck.transport.qemu import QemuTransport, qm_list
from fleetcheck.transport.qemu_api import ApiHostTransport, QemuApiTransport

#: How long one listing (pvesh, pct list, qm list, docker ps) may take.
LISTING_TIMEOUT = 30.0


def api_host_transport(host: HostSpec) -> Transport:
    """The transport of a `transport: api` host (the loader made sure it has `api:`)."""
    if host.api is None:
        raise DiscoveryError(f"{host.name}: transport: api needs an api: section",
                             host=host.name)
    return ApiHostTransport(host.api, host.name, slots=host.ssh.max_sessions)


def guest_transport(target: Target, host_transport: Transport) -> Transport:
    """The transport into `target`'s guest (its LXC container or VM), or the host's own."""
    host = target.host
    if target.vmid is None:
        return host_transport
    if target.kind == "qemu" or target.guest_kind == "qemu":
        if isinstance(host_transport, ApiHostTransport):
            return QemuApiTransport(host_transport.agent, target.vmid)
        return QemuTransport(host_transport, target.vmid, sudo=host.sudo, host_name=host.name)
    return PctTransport(host_transport, target.vmid, sudo=host.sudo)


def target_transport(target: Target, host_transport: Transport) -> Transport:
    """The transport that runs commands on `target`, given its host's transport."""
    parent = guest_transport(target, host_transport)
    if target.runtime is None or target.container is None:
        return parent
    # sudo only for the host's own login: inside pct exec or a VM the command runs as root.
    return OciTransport(parent, target.runtime, target.container, user=target.user,
                        sudo=target.host.sudo and target.vmid is None,
                        parent_name=target.parent or target.host.name)


async def list_guests(
    host: HostSpec, transport: Transport
) -> tuple[list[DiscoveredContainer] | None, list[DiscoveredContainer] | None]:
    """(containers, VMs) of a host with `containers: all` / `vms: all` (None where listed).

    From the Proxmox API when the host names one; else pvesh over the host's transport, and
    `pct list` / `qm list` when pvesh cannot answer. Raises DiscoveryError or TransportError.
    """
    want_lxc = host.containers == ALL_CONTAINERS
    want_vms = host.vms == ALL_CONTAINERS
    if not (want_lxc or want_vms):
        return None, None
    if host.api is not None:
        lxc, vms = await discover_guests_via_api(host)
        return (lxc if want_lxc else None), (vms if want_vms else None)
    found: dict[str, list[DiscoveredContainer] | None] = {"lxc": None, "qemu": None}
    for kind, wanted in (("lxc", want_lxc), ("qemu", want_vms)):
        if not wanted:
            continue
        listed = await pvesh_list(host, transport, kind, LISTING_TIMEOUT)
        if listed is None:
            listed = await (_pct_list(host, transport) if kind == "lxc"
                            else qm_list(host, transport, LISTING_TIMEOUT))
        found[kind] = listed
    return found["lxc"], found["qemu"]


async def _pct_list(host: HostSpec, transport: Transport) -> list[DiscoveredContainer]:
    from fleetcheck.inventory.discovery import parse_pct_list, pct_list_argv
    from fleetcheck.transport.pct import pct_refusal

    result = await transport.run(pct_list_argv(host), timeout=LISTING_TIMEOUT)
    if result.returncode != 0 or result.timed_out:
        stderr = result.stderr.decode("utf-8", "replace")
        reason = refusal_reason(stderr, result.returncode) or pct_refusal(stderr, host.name)
        if reason is None:
            if result.returncode == 127:
                reason = f"pct not found on {host.name}: is it a Proxmox VE host?"
            elif result.timed_out:
                reason = f"`pct list` on {host.name} timed out"
            else:
                lines = [line.strip() for line in stderr.splitlines() if line.strip()]
                reason = (f"`pct list` on {host.name} failed ({result.returncode}): "
                          f"{lines[-1] if lines else ''}")
        raise DiscoveryError(reason, host=host.name)
    return parse_pct_list(result.stdout.decode("utf-8", "replace"))


async def list_oci(target: Target, host_transport: Transport) -> list[DiscoveredOci]:
    """The running Docker/Podman containers inside `target` (a node with `oci: all`)."""
    assert target.oci is not None
    parent = guest_transport(target, host_transport)
    return await oci_list(target.oci.runtime, parent, target.id, LISTING_TIMEOUT,
                          sudo=target.host.sudo and target.vmid is None)
