"""Inventory data: hosts, containers, SSH options and the resolved targets, all frozen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleetcheck.transport.interface import DEFAULT_NODE_TIMEOUT

#: `containers: all` in the inventory.
ALL_CONTAINERS = "all"


@dataclass(frozen=True)
class SshOptions:
    """How to reach a host over SSH; `None` means "as OpenSSH would decide" (ssh_config)."""

    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    #: "strict" (default: unknown or changed keys refused) or "accept-new" (unknown keys
    #: are trusted on first use and appended to known_hosts; changed keys still refused).
    host_key_policy: str = "strict"
    proxy_jump: str | None = None
    #: ssh_config file to honour; None means ~/.ssh/config when it exists, "" means none.
    config_file: str | None = None
    connect_timeout: float = 10.0
    #: Concurrent channels on the one connection to this host (OpenSSH MaxSessions is 10).
    max_sessions: int = 8


@dataclass(frozen=True)
class ApiOptions:
    """Proxmox API discovery for a host (instead of `pct list` over SSH)."""

    url: str
    user: str
    token_name: str
    #: Name of the environment variable holding the token secret, or a file holding it.
    token_env: str | None = None
    token_file: str | None = None
    verify_tls: bool | str = True
    node: str | None = None
    timeout: float = 10.0


@dataclass(frozen=True)
class ContainerSpec:
    """A container named in the inventory (or found by discovery)."""

    vmid: int
    python: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    name: str | None = None
    #: Seconds for this container's probe; None: the host's timeout.
    timeout: float | None = None


@dataclass(frozen=True)
class HostSpec:
    """A Proxmox host (or any SSH-reachable machine, or the local machine)."""

    name: str
    address: str | None
    #: "ssh" or "local" (the machine fleetcheck runs on; no SSH involved).
    transport: str = "ssh"
    ssh: SshOptions = field(default_factory=SshOptions)
    probe_host: bool = False
    #: ALL_CONTAINERS, or the containers named.
    containers: str | tuple[ContainerSpec, ...] = ()
    python: str = "python3"
    env: Mapping[str, str] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    sudo: bool = False
    timeout: float = DEFAULT_NODE_TIMEOUT
    api: ApiOptions | None = None
    #: Where the host was declared, for messages: "inventory.yaml:12".
    origin: str = ""


@dataclass(frozen=True)
class Inventory:
    path: str
    hosts: tuple[HostSpec, ...]
    #: Whole-audit deadline in seconds (None: no limit beyond per-node timeouts).
    audit_timeout: float | None = None
    #: Global bound on nodes probed at once.
    concurrency: int = 64
    #: `groups:` of the file: name -> --limit patterns (host names, globs, labels, groups).
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Hosts declared with `enabled: false`: shown by `fleetcheck inventory`, never audited.
    disabled_hosts: tuple[HostSpec, ...] = ()


@dataclass(frozen=True)
class Target:
    """One node to probe: a host itself (vmid None) or a container on it."""

    host: HostSpec
    vmid: int | None
    name: str
    python: str
    env: Mapping[str, str]
    labels: tuple[str, ...]
    timeout: float

    @property
    def id(self) -> str:
        """`HOST` for a host, `HOST/VMID` for a container (the node id contract)."""
        return self.host.name if self.vmid is None else f"{self.host.name}/{self.vmid}"


@dataclass(frozen=True)
class SkippedTarget:
    """A node that is known but will not be probed (stopped, template, excluded)."""

    host: HostSpec
    vmid: int | None
    name: str
    reason: str
    labels: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.host.name if self.vmid is None else f"{self.host.name}/{self.vmid}"


@dataclass(frozen=True)
class DiscoveredContainer:
    """A container as `pct list` or the Proxmox API reports it."""

    vmid: int
    status: str
    name: str
    lock: str = ""
    template: bool = False
    tags: tuple[str, ...] = ()
