"""The keys a host's inventory entry accepts: the schema's own, then the node kinds'.

Above the kinds (each kind names the key that declares its nodes, `NodeKind.inventory_key`)
and above the schema, which the kinds read their declarations with: the one place of the
inventory that asks the registry which keys there are.
"""

from __future__ import annotations

from fleetcheck import kinds
from fleetcheck.inventory_data.schema import HOST_KEYS


def kind_keys() -> dict[str, kinds.NodeKind]:
    """The host keys of the node kinds (`kinds/`: a kind's `inventory_key`, which its
    `read_declaration` reads), each with its kind, in registry order."""
    found: dict[str, kinds.NodeKind] = {}
    for kind in kinds.all_kinds():
        key = kind.inventory_key
        if key is not None and kind.reads_declaration:
            found.setdefault(key, kind)
    return found


def host_keys() -> tuple[str, ...]:
    """Every key a host's entry accepts: the schema's, then the node kinds' own."""
    return (*HOST_KEYS, *(key for key in kind_keys() if key not in HOST_KEYS))
