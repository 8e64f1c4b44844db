"""Owns choosing each node's transport: the one place where a new node kind plugs in.

The scheduler (`audit.py`) asks `for_host` once per inventory host and `for_target` once per
node on it; it never names a concrete transport. A new kind of node (a QEMU guest agent via
`qm guest exec`, a Docker/Podman container via `docker exec -i`) is one new file in this
package plus one branch in `for_target` (or `for_host`), wrapping the parent's transport;
a new way of listing a host's guests is one branch in `list_containers`.
"""

from __future__ import annotations

import asyncio

from fleetcheck.inventory.model import DiscoveredContainer, HostSpec, Target
from fleetcheck.inventory.pveapi import discover_via_api
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.pct import PctTransport, pct_list
from fleetcheck.transport.ssh import DEFAULT_CONNECT_ATTEMPTS, SshTransport


class TransportFactory:
    """Builds the transports of one audit; they share its fleet-wide connection limiter."""

    def __init__(self, *, connect_attempts: int = DEFAULT_CONNECT_ATTEMPTS) -> None:
        self.connect_attempts = max(1, connect_attempts)
        self._connects: asyncio.Semaphore | None = None

    def for_host(self, host: HostSpec) -> Transport:
        """The transport to `host` itself; its nodes' transports wrap this one."""
        if host.transport == "local":
            return LocalTransport()
        if self._connects is None:
            # Made on first use, inside the audit's event loop.
            self._connects = asyncio.Semaphore(self.connect_attempts)
        return self.ssh_transport(host, self._connects)

    def ssh_transport(self, host: HostSpec, connects: asyncio.Semaphore) -> Transport:
        """An SSH transport to `host` (a bench or test overrides this to vary SSH alone)."""
        return SshTransport(host, connect_limiter=connects)

    async def list_containers(
        self, host: HostSpec, transport: Transport
    ) -> list[DiscoveredContainer]:
        """The containers of a `containers: all` host: from the Proxmox API when the host
        names one, else `pct list` over the host's transport. Raises DiscoveryError."""
        if host.api is not None:
            return await discover_via_api(host)
        return await pct_list(host, transport)

    def for_target(self, target: Target, host_transport: Transport) -> Transport:
        """The transport that runs commands on `target`, given its host's transport."""
        if target.vmid is not None:
            return PctTransport(host_transport, target.vmid, sudo=target.host.sudo,
                                host_name=target.host.name)
        return host_transport
