"""`fleetcheck inventory`: the resolved hosts and nodes, as a tree or JSON, without connecting."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleetcheck import kinds
from fleetcheck.inventory.discovery import static_targets
from fleetcheck.inventory_data.model import (
    HostSpec,
    Inventory,
    SshOptions,
    Target,
)

INVENTORY_SCHEMA = "fleetcheck.inventory/1"


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
        for kind in kinds.all_kinds():
            rows += kind.graph_rows(host, known)
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
    declared: dict[str, Any] = {}
    for kind in kinds.all_kinds():
        declared.update(kind.inventory_json(host))
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
        **declared,
        "nodes": [_target_json(t) for t in static_targets(host)],
    }


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
