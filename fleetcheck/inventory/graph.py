"""`fleetcheck inventory`: the resolved hosts and nodes, as a tree or JSON, without connecting."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleetcheck import kinds
from fleetcheck.inventory.discovery import targets_for_host
from fleetcheck.inventory.model import (
    ALL_CONTAINERS,
    ContainerSpec,
    HostSpec,
    Inventory,
    OciContainerSpec,
    OciSpec,
    SshOptions,
    Target,
)

INVENTORY_SCHEMA = "fleetcheck.inventory/1"


def discovery_method(host: HostSpec) -> str | None:
    """How `containers: all` is listed for `host`: "api", "pct list", or None (listed)."""
    if host.containers != ALL_CONTAINERS:
        return None
    return "api" if host.api is not None else "pct list"


def static_targets(host: HostSpec) -> list[Target]:
    """The nodes known without connecting: the host itself, listed guests and containers."""
    if host.containers == ALL_CONTAINERS:
        host = dataclasses.replace(host, containers=())
    if host.vms == ALL_CONTAINERS:
        host = dataclasses.replace(host, vms=())
    return [t for t in targets_for_host(host, None, None) if isinstance(t, Target)]


def render_inventory_graph(inventory: Inventory) -> str:
    """A tree, host -> nodes, with the effective settings of each (ends with a newline)."""
    total = len(inventory.hosts) + len(inventory.disabled_hosts)
    audit_timeout = (
        f"{inventory.audit_timeout:g}s" if inventory.audit_timeout is not None else "none"
    )
    lines = [
        f"{inventory.path}: {total} host{'s' if total != 1 else ''}"
        f" ({len(inventory.disabled_hosts)} disabled), concurrency {inventory.concurrency},"
        f" audit timeout {audit_timeout}"
    ]
    for host, enabled in [(h, True) for h in inventory.hosts] + [
        (h, False) for h in inventory.disabled_hosts
    ]:
        lines.append(_host_line(host) + ("" if enabled else "  [disabled: not audited]"))
        known = static_targets(host)
        rows = [_node_line(t) for t in known]
        for parent in ([t for t in known if t.oci is not None and t.runtime is None]
                       + ([] if host.probe_host or host.oci is None else [None])):
            oci = host.oci if parent is None else parent.oci
            if oci is not None and oci.containers == ALL_CONTAINERS:
                where = host.name if parent is None else parent.id
                rows.append(f"{where}/{oci.runtime}:*  all running: discovered at audit time "
                            f"via `{oci.runtime} ps`")
        method = discovery_method(host)
        if method:
            via = "the Proxmox API" if method == "api" else "pct list"
            labels = f"  labels={','.join(host.labels)}" if host.labels else ""
            rows.append(f"{host.name}/*  all: discovered at audit time via {via}{labels}")
        if host.vms == ALL_CONTAINERS:
            via = "the Proxmox API" if host.api is not None else "pvesh or qm list"
            rows.append(f"{host.name}/*  all VMs: discovered at audit time via {via}")
        if host.kubernetes is not None:
            rows.append(f"{host.name}/*  running pods: discovered at audit time via kubectl "
                        f"get pods ({_kubernetes_scope(host)})  python={host.python}")
        lines += _tree(rows)
    if inventory.groups:
        lines.append("groups")
        lines += _tree(
            [f"{name}: {', '.join(members)}" for name, members in inventory.groups.items()]
        )
    return "\n".join(lines) + "\n"


def _tree(rows: list[str]) -> list[str]:
    return [("└── " if i == len(rows) - 1 else "├── ") + row for i, row in enumerate(rows)]


def _host_line(host: HostSpec) -> str:
    parts = [host.name]
    if host.transport == "local":
        parts.append("local (this machine, no SSH)")
    elif host.transport == "api":
        parts.append("no SSH: VMs through the API's guest agent")
    else:
        parts.append(_ssh_summary(host.address or "", host.ssh))
    if host.sudo:
        parts.append("sudo -n pct")
    if host.api is not None:
        parts.append(f"api {host.api.url} node {host.api.node or host.name}")
    return "  ".join(parts)


def _ssh_summary(address: str, ssh: SshOptions) -> str:
    user = f"{ssh.user}@" if ssh.user else ""
    port = f":{ssh.port}" if ssh.port is not None else ""
    text = f"ssh {user}{address}{port}"
    unset = [name for name, value in (("user", ssh.user), ("port", ssh.port)) if value is None]
    if unset:
        text += f" ({', '.join(unset)} from ssh_config)"
    if ssh.proxy_jump:
        text += f" via {ssh.proxy_jump}"
    if ssh.host_key_policy not in (None, "strict"):
        text += f" host keys {ssh.host_key_policy}"
    return text


def _node_line(target: Target) -> str:
    parts = [target.id, f"python={target.python}", f"timeout={target.timeout:g}s"]
    if target.env:
        parts.append("env=" + ",".join(sorted(target.env)))
    if target.labels:
        parts.append("labels=" + ",".join(target.labels))
    described = kinds.kind(target.kind).describe(target)
    if described:
        parts.insert(1, described)
    if target.user:
        parts.append(f"user={target.user}")
    return "  ".join(parts)


def inventory_to_json(inventory: Inventory) -> dict[str, Any]:
    """The resolved inventory as JSON-ready data (no secret: only where the token is read)."""
    return {
        "schema": INVENTORY_SCHEMA,
        "path": inventory.path,
        "concurrency": inventory.concurrency,
        "audit_timeout": inventory.audit_timeout,
        "groups": {name: list(members) for name, members in inventory.groups.items()},
        "hosts": [_host_json(h, True) for h in inventory.hosts]
        + [_host_json(h, False) for h in inventory.disabled_hosts],
    }


def _host_json(host: HostSpec, enabled: bool) -> dict[str, Any]:
    containers: Any = (
        ALL_CONTAINERS
        if host.containers == ALL_CONTAINERS
        else [_container_json(c) for c in host.containers if isinstance(c, ContainerSpec)]
    )
    return {
        "name": host.name,
        "enabled": enabled,
        "origin": host.origin,
        "transport": host.transport,
        "address": host.address,
        "ssh": dataclasses.asdict(host.ssh),
        "sudo": host.sudo,
        "probe_host": host.probe_host,
        "python": host.python,
        "env": dict(host.env),
        "labels": list(host.labels),
        "timeout": host.timeout,
        "api": dataclasses.asdict(host.api) if host.api is not None else None,
        "containers": containers,
        "vms": ALL_CONTAINERS if host.vms == ALL_CONTAINERS else [
            _container_json(c) for c in host.vms if isinstance(c, ContainerSpec)],
        "oci": _oci_json(host.oci),
        "kubernetes": (dataclasses.asdict(host.kubernetes)
                       if host.kubernetes is not None else None),
        "discovery": discovery_method(host),
        "nodes": [_target_json(t) for t in static_targets(host)],
    }


def _kubernetes_scope(host: HostSpec) -> str:
    spec = host.kubernetes
    assert spec is not None
    namespaces = spec.namespaces
    parts = ["all namespaces" if namespaces == ALL_CONTAINERS else
             "namespaces " + ",".join(namespaces) if namespaces else "the context's namespace"]
    if spec.context:
        parts.append(f"context {spec.context}")
    if spec.selector:
        parts.append(f"selector {spec.selector}")
    parts.append("every container" if spec.container == ALL_CONTAINERS else
                 f"container {spec.container or '(the default)'}")
    return ", ".join(parts)


def _container_json(spec: ContainerSpec) -> dict[str, Any]:
    return {
        "vmid": spec.vmid,
        "name": spec.name,
        "python": spec.python,
        "env": dict(spec.env),
        "labels": list(spec.labels),
        "timeout": spec.timeout,
        "oci": _oci_json(spec.oci),
    }


def _oci_json(oci: OciSpec | None) -> dict[str, Any] | None:
    if oci is None:
        return None
    containers: Any = ALL_CONTAINERS if oci.containers == ALL_CONTAINERS else [
        dataclasses.asdict(c) for c in oci.containers if isinstance(c, OciContainerSpec)]
    return {"runtime": oci.runtime, "containers": containers}


def _target_json(target: Target) -> dict[str, Any]:
    return {
        "id": target.id,
        "kind": target.kind,
        "parent": target.parent,
        "vmid": target.vmid,
        "name": target.name,
        "python": target.python,
        "env": dict(target.env),
        "labels": list(target.labels),
        "timeout": target.timeout,
    }
