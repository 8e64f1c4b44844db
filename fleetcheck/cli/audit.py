"""`fleetcheck audit`: probe every node of an inventory at once and report per node."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli import options
from fleetcheck.cli.inputs import keeping, load_inventory, load_policy
from fleetcheck.cli.runs import audit_request, finish_run, with_progress

NAME = "audit"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="probe every node of an inventory and report",
        description="Probe every node of the inventory at once and report per node.",
        **options.WITH_EXIT_CODES,
    )
    parser.add_argument(
        "inventory", nargs="?", default=None,
        help="inventory YAML (default: the built-in one, which probes this machine only)",
    )
    options.add_selection(parser)
    options.add_output(parser)
    options.add_deep(parser)
    options.add_playbook(parser)
    options.add_timeout(parser, "deadline for the whole audit (default: the inventory's, or none)")
    options.add_history(parser, "keep this run in DIR and report what changed since the last one")
    options.add_no_progress(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands
    from fleetcheck.inventory import builtin_inventory

    kept = keeping(args)
    inventory = load_inventory(args.inventory) if args.inventory else builtin_inventory()
    policy = load_policy(args.playbook)
    request = audit_request(args, inventory, policy, args.limit, deep=args.deep,
                            history=kept.history, on_change=kept.on_change, keep=kept.keep)
    return finish_run(with_progress(not args.no_progress, commands.audit, request), args)
