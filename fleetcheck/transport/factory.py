"""Owns opening each host's transport, and so the transports of one audit.

The scheduler (`audit.py`) asks `for_host` once per inventory host and `for_target` once per
node on it; it never names a concrete transport. `for_host` picks SSH, the local machine or
the Proxmox API; `for_target` lets each node kind of the target's chain wrap the transport of
the node it runs in (`kinds.open_transport`), so a new kind plugs in through the kind
registry (`fleetcheck/kinds/`), not here.
"""

from __future__ import annotations

from fleetcheck import kinds
from fleetcheck.budget import BudgetFor, NodeBudget
from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.transport.interface import Transport
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.ssh import DEFAULT_CONNECT_ATTEMPTS, ConnectLimiter, SshTransport
from fleetcheck.transport.ssh_settings import SshFiles


class TransportFactory:
    """Builds the transports of one audit; they share its connection limiter (per SSH server
    and fleet-wide, `connect_attempts` being the fleet-wide bound) and its SSH files: each
    ssh_config, known_hosts file and key is read once for all the hosts that use it."""

    def __init__(self, *, connect_attempts: int = DEFAULT_CONNECT_ATTEMPTS,
                 budget: BudgetFor = NodeBudget) -> None:
        self.connect_attempts = max(1, connect_attempts)
        #: The audit's node budget, handed to every transport this factory makes.
        self.budget = budget
        self._connects: ConnectLimiter | None = None
        self.ssh_files = SshFiles()

    def for_host(self, host: HostSpec) -> Transport:
        """The transport to `host` itself; its nodes' transports wrap this one."""
        if host.transport == "local":
            return LocalTransport(budget=self.budget)
        if host.transport == "api":
            # Imported here: the API's client and its packings (lzma) are only an api host's.
            from fleetcheck.transport.qemu_api import ApiHostTransport

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
        return SshTransport(host, connect_limiter=connects, files=self.ssh_files,
                            budget=self.budget)

    def for_target(self, target: Target, host_transport: Transport) -> Transport:
        """The transport that runs commands on `target`, given its host's transport."""
        return kinds.open_transport(target, host_transport, self.budget)
