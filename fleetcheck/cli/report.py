"""`fleetcheck report`: a saved audit rendered again in any format, without probing."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli import options
from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.output import emit, file_options, output_format

NAME = "report"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="re-render a saved audit JSON without probing again",
        description="Re-render a saved audit (JSON, or .json.gz from --history) in any format.",
    )
    parser.add_argument("results",
                        help="audit JSON written by `fleetcheck audit --format json`")
    options.add_output(parser)
    parser.add_argument("--history", metavar="DIR",
                        help="add the trend and 'failing since' from this history directory")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    outcome = commands.report(args.results, args.history)
    emit(outcome.render(output_format(args.format, args.output), **file_options(args.output)),
         args.output)
    return EXIT_PASS
