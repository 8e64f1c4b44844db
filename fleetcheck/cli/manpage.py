"""`fleetcheck manpage`: the man page, as shipped (generated from this parser when fleetcheck
is built: `fleetcheck/completion_build.py`)."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.output import emit

NAME = "manpage"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="print the man page (roff)",
        description="Print fleetcheck's man page: fleetcheck manpage > "
        "/usr/local/share/man/man1/fleetcheck.1, or read it now: fleetcheck manpage | man -l -",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck.completion import shipped

    emit(shipped(None))
    return EXIT_PASS
