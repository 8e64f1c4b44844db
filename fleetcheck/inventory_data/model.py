"""Inventory data: hosts, containers, SSH options and the resolved targets, all frozen."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.budget import DEFAULT_API_TIMEOUT, DEFAULT_CONCURRENCY, DEFAULT_NODE_TIMEOUT
from fleetcheck.kindtable import default_kind

#: `containers: all` in the inventory (also `vms: all` and `oci: {containers: all}`).
ALL_CONTAINERS = "all"
#: pve-common's pve-vmid format.
VMID_MIN, VMID_MAX = 100, 999_999_999


def node_id(host: str, vmid: int | None, runtime: str | None = None,
            container: str | None = None, *, parent: str | None = None) -> str:
    """The node id contract: `HOST`, `HOST/VMID`, `PARENT/RUNTIME:NAME`."""
    guest = host if vmid is None else f"{host}/{vmid}"
    if runtime is None or container is None:
        return guest
    return f"{parent or guest}/{runtime}:{container}"


@dataclass(frozen=True)
class SshOptions:
    """How to reach a host over SSH; `None` means "as OpenSSH would decide" (ssh_config)."""

    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    #: "strict" (unknown or changed keys refused) or "accept-new" (unknown keys are trusted
    #: on first use and appended to known_hosts; changed keys still refused). None: as
    #: ssh_config's StrictHostKeyChecking says, strict when it says nothing.
    host_key_policy: str | None = None
    proxy_jump: str | None = None
    #: ssh_config file to honour; None means ~/.ssh/config when it exists, "" means none.
    config_file: str | None = None
    #: None: ssh_config's ConnectTimeout, else 10 s (transport/ssh_settings.py).
    connect_timeout: float | None = None
    #: Concurrent channels on the one connection to this host (OpenSSH MaxSessions is 10).
    max_sessions: int = 8
    #: The SSH client: "auto" (libssh2 where it does all the host's settings ask, else
    #: asyncssh), "libssh2" or "asyncssh" (transport/ssh.py, docs/transports.md).
    client: str = "auto"


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
    timeout: float = DEFAULT_API_TIMEOUT


@dataclass(frozen=True)
class OciContainerSpec:
    """A Docker/Podman container named in the inventory (or found by `docker ps`)."""

    name: str
    python: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    #: `docker exec --user`: the user (and group) the probe runs as inside the container.
    user: str | None = None
    labels: tuple[str, ...] = ()
    timeout: float | None = None


@dataclass(frozen=True)
class OciSpec:
    """`oci:` of a host, an LXC container or a VM: the runtime and its containers."""

    runtime: str
    #: ALL_CONTAINERS (the running ones `docker ps` lists), or the containers named.
    containers: str | tuple[OciContainerSpec, ...]


@dataclass(frozen=True)
class ContainerSpec:
    """An LXC container or a QEMU VM named in the inventory (or found by discovery)."""

    vmid: int
    python: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    name: str | None = None
    #: Seconds for this container's probe; None: the host's timeout.
    timeout: float | None = None
    #: Docker/Podman containers inside this guest.
    oci: OciSpec | None = None


@dataclass(frozen=True)
class KubernetesSpec:
    """`kubernetes:` of a host: a cluster whose running pods are nodes, reached with kubectl
    through the host's transport (this machine, or an SSH host that has kubectl)."""

    kubeconfig: str | None = None
    context: str | None = None
    #: Namespaces to list; () the context's own, ALL_CONTAINERS every namespace.
    namespaces: str | tuple[str, ...] = ()
    #: `kubectl get pods -l SELECTOR`.
    selector: str | None = None
    #: The container to probe: None the pod's default one, ALL_CONTAINERS each container.
    container: str | None = None


@dataclass(frozen=True)
class PodPlace:
    """Where a pod node is: `CLUSTER/NAMESPACE/POD[/CONTAINER]`; `pod` "*" for a namespace
    whose pods could not be listed."""

    namespace: str
    pod: str
    container: str | None = None
    #: Whether the container is part of the id (`containers: all`, one node per container).
    in_id: bool = False
    #: The Kubernetes node (machine) the pod runs on.
    node: str | None = None

    @property
    def path(self) -> str:
        """The id below the cluster: NAMESPACE/POD[/CONTAINER], `*` for pods not listed."""
        if self.namespace == "*":
            return "*"
        tail = f"/{self.container}" if self.in_id and self.container else ""
        return f"{self.namespace}/{self.pod}{tail}"


@dataclass(frozen=True)
class HostSpec:
    """A Proxmox host (or any SSH-reachable machine, or the local machine)."""

    name: str
    address: str | None
    #: "ssh", "local" (the machine fleetcheck runs on; no SSH involved) or "api" (no SSH:
    #: only its VMs are probed, through the Proxmox API's guest agent endpoints).
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
    #: False when the inventory named no timeout for the host (nor in `defaults`): a deep
    #: audit then gives its nodes the deep default instead (`budget.node_timeout`).
    timeout_given: bool = field(default=True, compare=False, repr=False)
    api: ApiOptions | None = None
    #: ALL_CONTAINERS, or the QEMU VMs named (probed through the guest agent).
    vms: str | tuple[ContainerSpec, ...] = ()
    #: Docker/Podman containers on the host itself.
    oci: OciSpec | None = None
    #: A Kubernetes cluster whose pods are this host's nodes (`CLUSTER/NAMESPACE/POD`).
    kubernetes: KubernetesSpec | None = None
    #: Where the host was declared, for messages: "inventory.yaml:12".
    origin: str = ""
    #: What the host declares under the keys of node kinds that have no field above (a
    #: kind's `inventory_key`, read by the kind: `fleetcheck/kinds/`), by key.
    declarations: Mapping[str, Any] = field(default_factory=dict)

    def declaration(self, key: str) -> Any:
        """What the entry declares under a node kind's `key`: the field of that name (the
        kinds fleetcheck shipped first: containers, vms, oci, kubernetes), else
        `declarations` (a kind added since), else None."""
        return getattr(self, key) if key in _HOST_FIELDS else self.declarations.get(key)


#: HostSpec's fields: a node kind's key with one of them is kept in it.
_HOST_FIELDS = frozenset(f.name for f in dataclasses.fields(HostSpec))


def declaration_fields(declared: Mapping[str, Any]) -> dict[str, Any]:
    """HostSpec's keyword arguments for what the node kinds read of one entry (key -> value):
    each key into the field of its name where HostSpec has one, the others into
    `declarations` (`HostSpec.declaration` reads either)."""
    fields = {key: value for key, value in declared.items() if key in _HOST_FIELDS}
    return {**fields,
            "declarations": {key: value for key, value in declared.items() if key not in fields}}


@dataclass(frozen=True)
class Inventory:
    path: str
    hosts: tuple[HostSpec, ...]
    #: Whole-audit deadline in seconds (None: no limit beyond per-node timeouts).
    audit_timeout: float | None = None
    #: Global bound on nodes probed at once.
    concurrency: int = DEFAULT_CONCURRENCY
    #: `groups:` of the file: name -> --limit patterns (host names, globs, labels, groups).
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Hosts declared with `enabled: false`: shown by `fleetcheck inventory`, never audited.
    disabled_hosts: tuple[HostSpec, ...] = ()
    #: What reading the inventory's sources left out or could not check, one line each.
    warnings: tuple[str, ...] = ()


class NodePlace:
    """Where a node runs, and so its id, kind and parent: shared by Target and SkippedTarget."""

    host: HostSpec
    vmid: int | None
    kind: str
    runtime: str | None
    container: str | None

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", default_kind(self.vmid))

    @property
    def id(self) -> str:
        """`HOST`, `HOST/VMID`, `PARENT/RUNTIME:NAME` or `CLUSTER/NAMESPACE/POD[/CONTAINER]`
        (the node id contract)."""
        pod: PodPlace | None = getattr(self, "pod", None)
        if pod is not None:
            return f"{self.host.name}/{pod.path}"
        return node_id(self.host.name, self.vmid, self.runtime, self.container)

    @property
    def node_kind(self) -> str:
        return self.kind

    @property
    def parent(self) -> str | None:
        """The id of the node this one runs in; None for a host."""
        if self.runtime is not None:
            return node_id(self.host.name, self.vmid)
        if getattr(self, "pod", None) is not None:
            return self.host.name
        return None if self.vmid is None else self.host.name


@dataclass(frozen=True)
class Target(NodePlace):
    """One node to probe: a host itself (vmid None), a guest on it, or an OCI container.

    `vmid` is the Proxmox guest the node is or runs in (None on the host itself); an OCI
    container also has `runtime` and `container`, and `kind` is its runtime.
    """

    host: HostSpec
    vmid: int | None
    name: str
    python: str
    env: Mapping[str, str]
    labels: tuple[str, ...]
    timeout: float
    #: A kind of the registry (`fleetcheck.kinds.NODE_KINDS`); left out, the registry's kind of
    #: a host or of a VMID (`kindtable.default_kind`).
    kind: str = ""
    #: For an OCI container: its runtime, its name, the kind of node it runs in and the user
    #: it runs as.
    runtime: str | None = None
    container: str | None = None
    guest_kind: str | None = None
    user: str | None = None
    #: The node's OCI spec (its Docker/Podman containers), for hosts and guests.
    oci: OciSpec | None = None
    #: For a Kubernetes pod: its namespace, name, container and machine.
    pod: PodPlace | None = None


@dataclass(frozen=True)
class SkippedTarget(NodePlace):
    """A node that is known but will not be probed (stopped, template, excluded) or that
    discovery could not read (`status` "error")."""

    host: HostSpec
    vmid: int | None
    name: str
    reason: str
    labels: tuple[str, ...] = ()
    kind: str = ""
    runtime: str | None = None
    container: str | None = None
    status: str = "skipped"
    #: The id when neither VMID nor name could be read (an unreadable discovery line).
    fixed_id: str | None = None
    #: For a Kubernetes pod (or a namespace that could not be listed: pod "*").
    pod: PodPlace | None = None

    @property
    def id(self) -> str:
        if self.fixed_id is not None:
            return self.fixed_id
        return super().id

    @property
    def parent(self) -> str | None:
        # An unreadable discovery line of a host still sits on that host.
        if self.fixed_id is not None and self.vmid is None and self.runtime is None:
            return self.host.name
        return super().parent


@dataclass(frozen=True)
class DiscoveredContainer:
    """A guest (LXC container or VM) as `pct list`, `qm list`, pvesh or the API report it.

    `problem` is set (and the other fields are what could be read) for a line or row that
    discovery could not understand: it becomes one error node, never the host's failure.
    """

    vmid: int | None
    status: str
    name: str
    lock: str = ""
    template: bool = False
    tags: tuple[str, ...] = ()
    problem: str = ""
    #: Where the problem was: "`pct list` line 4".
    where: str = ""


@dataclass(frozen=True)
class DiscoveredOci:
    """A Docker/Podman container as `docker ps -a` / `podman ps -a` (JSON) report it."""

    name: str
    state: str
    problem: str = ""
    where: str = ""
