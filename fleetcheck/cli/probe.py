"""`fleetcheck probe`: probe this machine and report (how a node gates itself), or print the
probe's source to read or run by hand."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli import options
from fleetcheck.cli.exits import EXIT_PASS
from fleetcheck.cli.inputs import load_policy
from fleetcheck.cli.options import UsageError
from fleetcheck.cli.output import check_output, emit, file_options, output_format

NAME = "probe"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from fleetcheck.budget import DEFAULT_DEEP_NODE_TIMEOUT, DEFAULT_NODE_TIMEOUT
    from fleetcheck.render import PROBE_FORMATS

    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="probe this machine (also how a node gates itself, e.g. a Slurm prolog)",
        description="Run the probe on this machine and report. With --script, print the "
        "probe's source instead, to read it or run it by hand: "
        "fleetcheck probe --script | ssh node python3 -",
        **options.WITH_EXIT_CODES,
    )
    parser.add_argument("--format", "-f", choices=PROBE_FORMATS, default=None,
                        help="table (default; inferred from -o's extension "
                        f"{options.suffix_words(PROBE_FORMATS)} when given), the node's JSON, "
                        "or Prometheus text for node_exporter's textfile collector")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write to FILE atomically instead of stdout (a *.prom file for "
                        "the textfile collector)")
    parser.add_argument("--cache", metavar="FILE", default=None,
                        help="also save the verdict to FILE (atomically) for `fleetcheck "
                        "health --cache FILE`")
    parser.add_argument("--nfd", metavar="FILE", default=None,
                        help="also write the verdict as a node-feature-discovery feature file "
                        "(atomically; labels fleetcheck.feature.node.kubernetes.io/*, expiring "
                        "after 30 min), e.g. /etc/kubernetes/node-feature-discovery/features.d/"
                        "fleetcheck")
    parser.add_argument("--python", metavar="PATH",
                        help="the workload's interpreter to examine (default: python3 on PATH)")
    options.add_deep(parser)
    options.add_timeout(parser, f"deadline for the whole probe (default: "
                        f"{DEFAULT_NODE_TIMEOUT:g}; {DEFAULT_DEEP_NODE_TIMEOUT:g} with --deep)")
    options.add_playbook(parser)
    parser.add_argument("--script", action="store_true",
                        help="print the probe's source and exit")
    parser.add_argument("--sha256", action="store_true",
                        help="with --script: print the SHA-256 of the probe's source instead "
                        "(what a host's gatekeeper allow-list holds)")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands
    from fleetcheck.render import PROBE_FORMATS

    if args.script or args.sha256:
        return _script(args)
    for path in (args.output, args.cache, args.nfd):
        check_output(path)
    policy = load_policy(args.playbook)
    outcome = commands.probe(commands.ProbeRequest(python=args.python, deep=args.deep,
                                                   timeout=args.timeout, policy=policy))
    if args.cache:
        from fleetcheck.integrations.health_check import cache_document

        emit(cache_document(outcome.document, outcome.exit_code), args.cache)
    if args.nfd:
        from fleetcheck.integrations.nfd import feature_file

        emit(feature_file(outcome.document), args.nfd)
    fmt = output_format(args.format, args.output, PROBE_FORMATS)
    emit(outcome.render(fmt, **file_options(args.output)), args.output)
    return outcome.exit_code


def _script(args: argparse.Namespace) -> int:
    """`--script`: the probe's source, as the audit sends it; with `--sha256`, its hash."""
    if args.sha256:
        if not args.script:
            raise UsageError("--sha256 goes with --script (fleetcheck probe --script --sha256)")
        from fleetcheck.host_setup import probe_sha256

        emit(probe_sha256() + "\n")
        return EXIT_PASS
    from fleetcheck.probe import probe_source

    emit(probe_source())
    return EXIT_PASS
