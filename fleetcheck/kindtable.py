"""The node kinds' table: each kind's name and where its `NodeKind` is, as data.

It imports nothing, so any module can ask it, the inventory's data (`inventory/model.py`)
included, which the kinds themselves import; the registry (`kinds/__init__.py`) loads each
kind from its line here. Adding a kind is one module and one line in `KINDS`.
"""

from __future__ import annotations

#: kind name -> "module:attribute" of its NodeKind. The order of the lines is the order in
#: which a parent's children are expanded and listed.
KINDS: dict[str, str] = {
    "host": "fleetcheck.kinds.host:HOST",
    "docker": "fleetcheck.kinds.oci:DOCKER",
    "podman": "fleetcheck.kinds.oci:PODMAN",
    "lxc": "fleetcheck.kinds.lxc:LXC",
    "qemu": "fleetcheck.kinds.qemu:QEMU",
    "pod": "fleetcheck.kinds.pod:POD",
}

#: The kind of the root of every node tree: a host itself.
ROOT_KIND = "host"
#: The kind of a node given with a VMID and without a kind (`Target(host, vmid, ...)` in the
#: Python API): an LXC container, the guests fleetcheck knew first.
VMID_KIND = "lxc"


def place_kind(vmid: int | None) -> str:
    """The kind of a node given without one: the host itself, or the guest with `vmid`."""
    return ROOT_KIND if vmid is None else VMID_KIND
