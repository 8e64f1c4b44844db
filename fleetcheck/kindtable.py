"""The node kinds' table: each kind's name and where its `NodeKind` is, as data.

It imports nothing, so any module can ask it, the inventory's data (`inventory_data/model.py`)
included, which the kinds themselves import; the registry (`kinds/__init__.py`) loads each
kind from its line here. Adding a kind is one module and one line in `KINDS`.
"""

from __future__ import annotations

#: kind name -> "module:attribute" of its NodeKind. The order of the lines is the order in
#: which a parent's children are expanded and listed; the first is the root kind, the one
#: every tree of nodes starts from and that runs in no other (`kinds.root`).
KINDS: dict[str, str] = {
    "host": "fleetcheck.kinds.host:HOST",
    "docker": "fleetcheck.kinds.oci:DOCKER",
    "podman": "fleetcheck.kinds.oci:PODMAN",
    "lxc": "fleetcheck.kinds.lxc:LXC",
    "qemu": "fleetcheck.kinds.qemu:QEMU",
    "pod": "fleetcheck.kinds.pod:POD",
}
#: The root kind: a host itself.
ROOT_KIND = next(iter(KINDS))
#: What a VMID meant where a node has no kind: in reports written before nodes had one, and
#: in a `Target` built without one (the Python API): their only guests were LXC containers.
GUEST_BEFORE_KINDS = "lxc"


def default_kind(vmid: int | None) -> str:
    """The kind of a node that names none: the root's without a VMID, else the guest kind
    such nodes meant."""
    return ROOT_KIND if vmid is None else GUEST_BEFORE_KINDS
