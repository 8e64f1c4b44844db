"""`fleetcheck diff`: what changed between two saved audits; exit codes as diff(1)'s."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_FAIL, EXIT_PASS
from fleetcheck.cli.output import emit

NAME = "diff"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="what changed between two saved audits",
        description="Compare two saved audits. Exit 0: no change, 1: changes, 2: trouble.",
    )
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--json", action="store_true", help="JSON instead of text")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    diff = commands.diff(args.old, args.new)
    if args.json:
        import json

        emit(json.dumps(diff.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        emit("".join(line + "\n" for line in diff.lines()))
    return EXIT_FAIL if diff.changed else EXIT_PASS
