"""From a host to its nodes: the discovery commands, and hosts expanded into targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetcheck.inventory.errors import InventoryError
from fleetcheck.inventory.listings import discovered_vmid, parse_pct_list
from fleetcheck.inventory.model import (
    ALL_CONTAINERS,
    ContainerSpec,
    DiscoveredContainer,
    DiscoveredOci,
    HostSpec,
    OciContainerSpec,
    SkippedTarget,
    Target,
)

__all__ = [
    "discovered_vmid",
    "needs_discovery",
    "oci_targets",
    "parse_pct_list",
    "targets_for_host",
]


def targets_for_host(
    host: HostSpec,
    discovered: Sequence[DiscoveredContainer] | None,
    vms: Sequence[DiscoveredContainer] | None = None,
) -> list[Target | SkippedTarget]:
    """The nodes of `host`: the host itself (probe_host), its containers, then its VMs.

    For `containers: all` (`vms: all`), `discovered` (`vms`) is required: running guests are
    probed, templates and stopped ones become skipped nodes, and a listing line discovery
    could not read becomes an error node. For listed guests the listing may be None; when
    given it only supplies names and Proxmox tags. Docker/Podman containers named in an
    `oci:` follow the node they run in; `oci: {containers: all}` is left to `oci_targets`
    once that node's `docker ps` is known. Python, env, labels and timeout inherit
    defaults -> host -> guest, and defaults -> host -> OCI container (an image does not see
    its guest's interpreter); labels and timeout also guest -> OCI container.
    """
    nodes: list[Target | SkippedTarget] = []
    if host.probe_host:
        hosted = Target(host=host, vmid=None, name=host.name, python=host.python,
                        env=dict(host.env), labels=host.labels, timeout=host.timeout,
                        kind="host", oci=host.oci)
        nodes.append(hosted)
        nodes += oci_targets(hosted, None)
    elif host.oci is not None:
        # Docker on the host without probing the host itself: the parent is not a node.
        parent = Target(host=host, vmid=None, name=host.name, python=host.python,
                        env=dict(host.env), labels=host.labels, timeout=host.timeout,
                        kind="host", oci=host.oci)
        nodes += oci_targets(parent, None)
    nodes += _guests(host, host.containers, discovered, "lxc")
    nodes += _guests(host, host.vms, vms, "qemu")
    return nodes


def _guests(
    host: HostSpec,
    specs: str | tuple[ContainerSpec, ...],
    discovered: Sequence[DiscoveredContainer] | None,
    kind: str,
) -> list[Target | SkippedTarget]:
    key = "containers" if kind == "lxc" else "vms"
    nodes: list[Target | SkippedTarget] = []
    if specs == ALL_CONTAINERS:
        if discovered is None:
            raise InventoryError(
                f"{host.origin or host.name}: {key}: all needs discovery before targets"
            )
        readable = sorted((g for g in discovered if g.vmid is not None),
                          key=lambda g: g.vmid or 0)
        for index, found in enumerate([*readable, *(g for g in discovered if g.vmid is None)]):
            labels = _merge_labels(host.labels, found.tags)
            if found.problem:
                nodes.append(_unreadable(host, found, kind, index))
                continue
            assert found.vmid is not None
            reason = _skip_reason(found, kind)
            if reason:
                nodes.append(SkippedTarget(host, found.vmid, found.name, reason, labels,
                                           kind=kind))
            else:
                nodes += _guest_nodes(host, ContainerSpec(vmid=found.vmid), found, kind)
        return nodes
    by_vmid = {g.vmid: g for g in discovered or () if g.vmid is not None and not g.problem}
    for spec in specs:
        if isinstance(spec, ContainerSpec):
            nodes += _guest_nodes(host, spec, by_vmid.get(spec.vmid), kind)
    return nodes


def _unreadable(
    host: HostSpec, found: DiscoveredContainer, kind: str, index: int
) -> SkippedTarget:
    """One error node for a listing line discovery could not read (its VMID when readable)."""
    reason = f"discovery could not read {found.where}: {found.problem}"
    fixed = None if found.vmid is not None else f"{host.name}/unreadable-{index + 1}"
    return SkippedTarget(host, found.vmid, found.name or (fixed or ""), reason, host.labels,
                         kind=kind, status="error", fixed_id=fixed)


def _skip_reason(found: DiscoveredContainer, kind: str) -> str:
    if found.template:
        return "template"
    if found.status != "running":
        # A lock (backup, migrate...) on a running container does not stop `pct exec`, so
        # only the status decides; the lock is kept in the reason for stopped ones.
        lock = f", locked: {found.lock}" if found.lock else ""
        what = "container" if kind == "lxc" else "VM"
        return f"{what} {found.status}{lock}"
    return ""


def _guest_nodes(
    host: HostSpec, spec: ContainerSpec, found: DiscoveredContainer | None, kind: str
) -> list[Target | SkippedTarget]:
    labels = _merge_labels(host.labels, spec.labels, found.tags if found else ())
    name = spec.name or (found.name if found else None) or f"{host.name}/{spec.vmid}"
    guest = Target(
        host=host,
        vmid=spec.vmid,
        name=name,
        python=spec.python or host.python,
        env=_merge_env(host.env, spec.env),
        labels=labels,
        timeout=spec.timeout if spec.timeout is not None else host.timeout,
        kind=kind,
        oci=spec.oci,
    )
    return [guest, *oci_targets(guest, None)]


def oci_targets(
    parent: Target, discovered: Sequence[DiscoveredOci] | None
) -> list[Target | SkippedTarget]:
    """The Docker/Podman containers of `parent` (a host or guest target with `oci`).

    Listed containers need no listing. For `containers: all`, nothing is returned until
    `discovered` (the parent's `docker ps`) is given: running containers become targets,
    paused or otherwise not running ones skipped nodes, unreadable lines error nodes.
    """
    oci = parent.oci
    if oci is None:
        return []
    specs: list[tuple[OciContainerSpec, DiscoveredOci | None]] = []
    nodes: list[Target | SkippedTarget] = []
    runtime = oci.runtime
    if oci.containers == ALL_CONTAINERS:
        if discovered is None:
            return []
        for index, found in enumerate(discovered):
            if found.problem:
                name = f"unreadable-{index + 1}"
                nodes.append(SkippedTarget(
                    parent.host, parent.vmid, name,
                    f"discovery could not read {found.where}: {found.problem}",
                    parent.labels, kind=runtime, runtime=runtime, container=name,
                    status="error"))
            elif found.state != "running":
                nodes.append(SkippedTarget(parent.host, parent.vmid, found.name,
                                           f"container {found.state}", parent.labels,
                                           kind=runtime, runtime=runtime,
                                           container=found.name))
            else:
                specs.append((OciContainerSpec(name=found.name), found))
    else:
        specs = [(spec, None) for spec in oci.containers if isinstance(spec, OciContainerSpec)]
    for spec, _found in specs:
        nodes.append(Target(
            host=parent.host,
            vmid=parent.vmid,
            name=spec.name,
            # An image is its own filesystem: the guest's interpreter and environment do not
            # apply inside it, the host's (and the defaults') do.
            python=spec.python or parent.host.python,
            env=_merge_env(parent.host.env, spec.env),
            labels=_merge_labels(parent.labels, spec.labels),
            timeout=spec.timeout if spec.timeout is not None else parent.timeout,
            container=spec.name,
            guest_kind=parent.node_kind,
            user=spec.user,
            kind=runtime,
            runtime=runtime,
        ))
    return nodes


def _merge_labels(*groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(label for group in groups for label in group))


def _merge_env(*layers: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer)
    return merged


def needs_discovery(host: HostSpec) -> bool:
    """Whether some of `host`'s nodes are known only after a listing runs on it."""
    if ALL_CONTAINERS in (host.containers, host.vms):
        return True
    guests = [g for g in (*host.containers, *host.vms) if isinstance(g, ContainerSpec)]
    return any(oci is not None and oci.containers == ALL_CONTAINERS
               for oci in (host.oci, *(g.oci for g in guests)))
