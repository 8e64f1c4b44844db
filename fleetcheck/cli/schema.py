"""`fleetcheck schema`: the JSON Schemas of the documents fleetcheck writes, as shipped."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.options import UsageError
from fleetcheck.cli.output import emit

NAME = "schema"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="print the JSON Schema of a document fleetcheck writes",
        description="Print the JSON Schema (draft 2020-12) of the probe's document "
        "(fleetcheck.probe/1), the node document (fleetcheck.node/1) or the audit report "
        "(fleetcheck.audit/1); without NAME, or with --list, list them. The same files are "
        "in docs/schemas/.",
    )
    parser.add_argument("name", nargs="?", choices=("probe", "node", "audit"), metavar="NAME",
                        help="probe, node or audit")
    parser.add_argument("--list", action="store_true", help="list the schemas and exit")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import schemas

    if args.name is None or args.list:
        if args.name is not None:
            raise UsageError("schema: give NAME or --list, not both")
        emit(schemas.listing())
        return EXIT_PASS
    emit(schemas.shipped(args.name))
    return EXIT_PASS
