"""Owns choosing each node's transport: the one place where a new node kind plugs in.

The scheduler (`audit.py`) asks `for_host` once per inventory host and `for_target` once per
node on it; it never names a concrete transport. A new kind of node (a QEMU guest agent via
`qm guest exec`, a Docker/Podman container via `docker exec -i`) is one new file in this
package plus one branch in `for_target` (or `for_host`), wrapping the parent's transport;
a new way of listing a host's guests is one branch in `list_guests`.

The kinds: an LXC container is `pct exec` on its host's transport, a VM `qm guest exec` on
it (or the API's agent endpoints for a `transport: api` host), and a Docker/Podman container
the runtime's `exec -i` on its parent's transport, whatever that parent is.
"""

from __future__ import annotations

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
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.oci import OciTransport, oci_list
from fleetcheck.transport.pct import PCT_LIST_TIMEOUT, PctTransport, pct_list
from fleetcheck.transport.pvesh import pvesh_list
from fleetcheck.transport.qemu import QemuTransport, qm_list
from fleetcheck.transport.qemu_api import ApiHostTransport, QemuApiTransport
from fleetcheck.transport.ssh import DEFAULT_CONNECT_ATTEMPTS, ConnectLimiter, SshTransport
from fleetcheck.transport.ssh_settings import SshFiles

#: How long one listing (pvesh, qm list, docker ps) may take: as long as `pct list`.
LISTING_TIMEOUT = PCT_LIST_TIMEOUT


class TransportFactory:
    """Builds the transports of one audit; they share its connection limiter (per SSH server
    and fleet-wide, `connect_attempts` being the fleet-wide bound) and its SSH files: each
    ssh_config, known_hosts file and key is read once for all the hosts that use it."""

    def __init__(self, *, connect_attempts: int = DEFAULT_CONNECT_ATTEMPTS) -> None:
        self.connect_attempts = max(1, connect_attempts)
        self._connects: ConnectLimiter | None = None
        self.ssh_files = SshFiles()

    def for_host(self, host: HostSpec) -> Transport:
        """The transport to `host` itself; its nodes' transports wrap this one."""
        if host.transport == "local":
            return LocalTransport()
        if host.transport == "api":
            # No SSH: only the VMs' guest agents, through the API (the loader checked `api:`).
            if host.api is None:
                raise DiscoveryError(f"{host.name}: transport: api needs an api: section",
                                     host=host.name)
            return ApiHostTransport(host.api, host.name, slots=host.ssh.max_sessions)
        if self._connects is None:
            # Made on first use, inside the audit's event loop.
            self._connects = ConnectLimiter(fleet_wide=self.connect_attempts)
        return self.ssh_transport(host, self._connects)

    def ssh_transport(self, host: HostSpec, connects: ConnectLimiter) -> Transport:
        """An SSH transport to `host` (a bench or test overrides this to vary SSH alone)."""
        return SshTransport(host, connect_limiter=connects, files=self.ssh_files)

    async def list_containers(
        self, host: HostSpec, transport: Transport
    ) -> list[DiscoveredContainer]:
        """The containers of a `containers: all` host (see `list_guests`)."""
        lxc, _ = await self.list_guests(host, transport)
        return lxc or []

    async def list_guests(
        self, host: HostSpec, transport: Transport
    ) -> tuple[list[DiscoveredContainer] | None, list[DiscoveredContainer] | None]:
        """(containers, VMs) of a host with `containers: all` / `vms: all` (None where listed).

        From the Proxmox API when the host names one; else pvesh over the host's transport,
        and `pct list` / `qm list` when pvesh cannot answer. Raises DiscoveryError (or
        TransportError when the host cannot be reached).
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
            if wanted:
                listed = await pvesh_list(host, transport, kind, LISTING_TIMEOUT)
                if listed is None:
                    listed = await (pct_list(host, transport) if kind == "lxc"
                                    else qm_list(host, transport, LISTING_TIMEOUT))
                found[kind] = listed
        return found["lxc"], found["qemu"]

    async def list_oci(self, target: Target, host_transport: Transport) -> list[DiscoveredOci]:
        """The running Docker/Podman containers inside `target` (a node with an `oci:`)."""
        assert target.oci is not None
        return await oci_list(target.oci.runtime, self._guest(target, host_transport),
                              target.id, LISTING_TIMEOUT,
                              sudo=target.host.sudo and target.vmid is None)

    def for_target(self, target: Target, host_transport: Transport) -> Transport:
        """The transport that runs commands on `target`, given its host's transport."""
        parent = self._guest(target, host_transport)
        if target.runtime is None or target.container is None:
            return parent
        # sudo only for the host's own login: inside pct exec or a VM it runs as root.
        return OciTransport(parent, target.runtime, target.container, user=target.user,
                            sudo=target.host.sudo and target.vmid is None,
                            parent_name=target.parent or target.host.name)

    def _guest(self, target: Target, host_transport: Transport) -> Transport:
        """The transport into the guest `target` is or runs in, or the host's own."""
        host = target.host
        if target.vmid is None:
            return host_transport
        if "qemu" in (target.kind, target.guest_kind):
            if isinstance(host_transport, ApiHostTransport):
                return QemuApiTransport(host_transport.agent, target.vmid)
            return QemuTransport(host_transport, target.vmid, sudo=host.sudo,
                                 host_name=host.name)
        return PctTransport(host_transport, target.vmid, sudo=host.sudo, host_name=host.name)
