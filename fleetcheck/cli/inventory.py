"""`fleetcheck inventory`: the resolved hosts and nodes of an inventory, without connecting."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.inputs import load_inventory
from fleetcheck.cli.output import emit

NAME = "inventory"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="show the resolved targets without connecting",
        description="Load and validate an inventory and print its hosts and containers as a "
        "tree, without connecting to anything.",
    )
    parser.add_argument("inventory", help="inventory YAML")
    parser.add_argument("--json", action="store_true", help="JSON instead of a tree")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck.inventory import inventory_to_json, render_inventory_graph

    inventory = load_inventory(args.inventory)
    if args.json:
        import json

        emit(json.dumps(inventory_to_json(inventory), indent=2) + "\n")
    else:
        emit(render_inventory_graph(inventory))
    return EXIT_PASS
