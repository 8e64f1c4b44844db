"""What the benchmark needs from a loopback fleet, built with the tests' fleet kit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BenchHost:
    name: str
    port: int
    vmids: tuple[int, ...]


@dataclass(frozen=True)
class BenchFleet:
    """A running fleet: where its sshd listen, how to log in, how to call its `pct` directly."""

    hosts: tuple[BenchHost, ...]
    user: str
    identity_file: str
    known_hosts: str
    #: fleetcheck inventory YAML for this fleet.
    inventory_path: str
    #: argv prefix that runs the `pct` stand-in as an SSH login on the host would.
    pct_command: tuple[str, ...]
    #: Environment a login on the host has (what sshd gives the `pct` it runs).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Per host name, when each host has its own `pct` (it finds its containers beside it).
    pct_commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: pids of the long-lived processes of the fleet (sshd): never mistaken for orphans.
    server_pids: Callable[[], set[int]] = set
    closer: Callable[[], object] | None = None
    #: A fleet of bare-metal nodes (bench/nodes.py): per node, its session's environment.
    #: Empty for a fleet of Proxmox hosts and their containers.
    node_envs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: Bare-metal nodes: an ssh_config with one Host block per node, and a fleetcheck
    #: inventory that reaches the nodes through it alone.
    ssh_config: str = ""
    inventory_sshcfg: str = ""

    @property
    def bare(self) -> bool:
        return bool(self.node_envs)

    @property
    def container_count(self) -> int:
        """The nodes probed: containers, or the bare-metal nodes themselves."""
        if self.bare:
            return len(self.hosts)
        return sum(len(host.vmids) for host in self.hosts)

    def pct_prefix(self, host: BenchHost) -> list[str]:
        return list(self.pct_commands.get(host.name, self.pct_command))

    def pct_env(self, host: BenchHost) -> dict[str, str]:
        env = dict(self.env)
        own = self.pct_commands.get(host.name)
        if own and "PATH" in env:
            # The host's own bin/ first, as its sshd's SetEnv puts it.
            env["PATH"] = f"{own[0].rsplit('/', 1)[0]}:{env['PATH'].split(':', 1)[1]}"
        return env

    def close(self) -> None:
        if self.closer is not None:
            self.closer()
