"""The inventory stage: load and validate inventory.yaml, select nodes, discover containers.

Above the node kinds, which it asks for their keys, id shapes and expansions; the data and
readers the kinds need are below them, in `fleetcheck/inventory_data/`, and re-exported here as
the stage's API (`HostSpec`, `InventoryError`...). Nothing below the kinds imports this package.

The modules that moved there (`fleetcheck.inventory.model` is `fleetcheck.inventory_data.model`
now, and so on) stay importable by their old names, as the same module objects, for code
written against them; fleetcheck's own modules use the new names (mypy knows only those, and
tests/test_import_graph.py reads an old name as an import of this package).
"""

from __future__ import annotations

import sys

from fleetcheck.inventory.builtin import builtin_inventory
from fleetcheck.inventory.discovery import parse_pct_list, targets_for_host
from fleetcheck.inventory.graph import inventory_to_json, render_inventory_graph
from fleetcheck.inventory.limit import (
    check_limit,
    host_may_match,
    matches_limit,
    may_select_guests,
    may_select_inside,
    unmatched_limit_error,
    unmatched_patterns,
)
from fleetcheck.inventory.load import load_inventory, parse_inventory
from fleetcheck.inventory_data import (
    errors,
    listings,
    model,
    patterns,
    pveapi,
    ranges,
    reader,
    schema,
    yamlread,
    yamlsrc,
)
from fleetcheck.inventory_data.errors import DiscoveryError, InventoryError
from fleetcheck.inventory_data.model import (
    ALL_CONTAINERS,
    ApiOptions,
    ContainerSpec,
    DiscoveredContainer,
    HostSpec,
    Inventory,
    SkippedTarget,
    SshOptions,
    Target,
)
from fleetcheck.inventory_data.pveapi import discover_via_api

for _moved in (errors, listings, model, patterns, pveapi, ranges, reader, schema, yamlread,
               yamlsrc):
    sys.modules.setdefault(f"{__name__}.{_moved.__name__.rpartition('.')[2]}", _moved)
del _moved

__all__ = [
    "ALL_CONTAINERS",
    "ApiOptions",
    "ContainerSpec",
    "DiscoveredContainer",
    "DiscoveryError",
    "HostSpec",
    "Inventory",
    "InventoryError",
    "SkippedTarget",
    "SshOptions",
    "Target",
    "builtin_inventory",
    "check_limit",
    "discover_via_api",
    "host_may_match",
    "inventory_to_json",
    "load_inventory",
    "matches_limit",
    "may_select_guests",
    "may_select_inside",
    "parse_inventory",
    "parse_pct_list",
    "render_inventory_graph",
    "targets_for_host",
    "unmatched_limit_error",
    "unmatched_patterns",
]
