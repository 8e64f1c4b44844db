"""From a host to its nodes: `pct list` output parsed, and hosts expanded into targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetcheck.inventory.errors import DiscoveryError, InventoryError
from fleetcheck.inventory.load import VMID_MAX, VMID_MIN
from fleetcheck.inventory.model import (
    ALL_CONTAINERS,
    ContainerSpec,
    DiscoveredContainer,
    HostSpec,
    SkippedTarget,
    Target,
)

_PCT_HEADER = ("VMID", "Status", "Lock", "Name")


def discovered_vmid(value: object) -> int | None:
    """A VMID from `pct list` or the API, checked like the inventory's (pve-vmid), else None.

    Only an int or a string of ASCII digits counts: `int()` alone would take 101.7 (another
    container), True (1), "²" or Arabic-Indic digits.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            return None
        value = int(value)
    if not isinstance(value, int) or not VMID_MIN <= value <= VMID_MAX:
        return None
    return value


def parse_pct_list(text: str) -> list[DiscoveredContainer]:
    """Parse `pct list` stdout; raise DiscoveryError when it is not pct list output.

    pct prints `printf "%-10s %-10s %-12s %-20s\\n"` rows (VMID Status Lock Name) under a
    header, and nothing at all, not even the header, when the host has no containers. The
    columns are not relied on: a lock such as `snapshot-delete` or a long name overflows its
    column. Words are: VMID and status always, the lock only when set, and the name, which is
    the hostname or `CT<vmid>` with whitespace stripped, so it is never empty.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    if tuple(lines[0].split()) != _PCT_HEADER:
        raise DiscoveryError(f"unexpected `pct list` output: {_first_words(lines[0])}")
    found: list[DiscoveredContainer] = []
    for line in lines[1:]:
        words = line.split()
        if len(words) == 3:
            vmid, status, name = words
            lock = ""
        elif len(words) == 4:
            vmid, status, lock, name = words
        else:
            raise DiscoveryError(f"unexpected `pct list` line: {_first_words(line)}")
        number = discovered_vmid(vmid)
        if number is None:
            raise DiscoveryError(f"unexpected `pct list` line (VMID {vmid!r}): {line.strip()}")
        found.append(DiscoveredContainer(vmid=number, status=status, name=name, lock=lock))
    return found


def _first_words(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= 80 else text[:77] + "..."


def targets_for_host(
    host: HostSpec, discovered: Sequence[DiscoveredContainer] | None
) -> list[Target | SkippedTarget]:
    """The nodes of `host`: the host itself (probe_host), then its containers by VMID.

    For `containers: all`, `discovered` (from `parse_pct_list` or `discover_via_api`) is
    required: running containers are probed, templates and stopped ones become skipped
    nodes. For listed containers, `discovered` may be None; when given it only supplies
    names and Proxmox tags. Python, env, labels and timeout inherit defaults -> host ->
    container.
    """
    nodes: list[Target | SkippedTarget] = []
    if host.probe_host:
        nodes.append(
            Target(
                host=host,
                vmid=None,
                name=host.name,
                python=host.python,
                env=dict(host.env),
                labels=host.labels,
                timeout=host.timeout,
            )
        )
    by_vmid = {c.vmid: c for c in discovered or ()}
    if host.containers == ALL_CONTAINERS:
        if discovered is None:
            raise InventoryError(
                f"{host.origin or host.name}: containers: all needs discovery before targets"
            )
        for found in sorted(discovered, key=lambda c: c.vmid):
            labels = _merge_labels(host.labels, found.tags)
            reason = _skip_reason(found)
            if reason:
                nodes.append(SkippedTarget(host, found.vmid, found.name, reason, labels))
            else:
                nodes.append(_container_target(host, ContainerSpec(vmid=found.vmid), found))
        return nodes
    for spec in host.containers:
        if isinstance(spec, ContainerSpec):
            nodes.append(_container_target(host, spec, by_vmid.get(spec.vmid)))
    return nodes


def _skip_reason(found: DiscoveredContainer) -> str:
    if found.template:
        return "template"
    if found.status != "running":
        # A lock (backup, migrate...) on a running container does not stop `pct exec`, so
        # only the status decides; the lock is kept in the reason for stopped ones.
        lock = f", locked: {found.lock}" if found.lock else ""
        return f"container {found.status}{lock}"
    return ""


def _container_target(
    host: HostSpec, spec: ContainerSpec, found: DiscoveredContainer | None
) -> Target:
    labels = _merge_labels(host.labels, spec.labels, found.tags if found else ())
    name = spec.name or (found.name if found else None) or f"{host.name}/{spec.vmid}"
    return Target(
        host=host,
        vmid=spec.vmid,
        name=name,
        python=spec.python or host.python,
        env=_merge_env(host.env, spec.env),
        labels=labels,
        timeout=spec.timeout if spec.timeout is not None else host.timeout,
    )


def _merge_labels(*groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(label for group in groups for label in group))


def _merge_env(*layers: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer)
    return merged
