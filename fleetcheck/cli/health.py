"""`fleetcheck health`: this node's health in one line, from the verdict `probe --cache` saved
or a probe now, for Slurm (draining or resuming the node) or node-problem-detector."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli import options
from fleetcheck.cli.inputs import load_policy, out_bound
from fleetcheck.cli.output import emit, say

NAME = "health"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from fleetcheck.budget import DEFAULT_NODE_TIMEOUT

    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="this node's health for Slurm (HealthCheckProgram) or node-problem-detector",
        description="Say whether this node is healthy, from the verdict cached by `fleetcheck "
        "probe --cache FILE` (fast: for Slurm's HealthCheckProgram, killed after 60 s) or from "
        "a probe run now. Prints one line; exit 0 ok, 1 fail, 3 not verified (stale or missing "
        "cache, probe error): node-problem-detector's OK / NonOK / Unknown. See "
        "docs/integrations.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cache", metavar="FILE",
                        help="read the verdict `fleetcheck probe --cache FILE` saved, instead "
                        "of probing now")
    options.add_max_age(parser, "a cached verdict older than this is not verified")
    parser.add_argument("--npd", action="store_true",
                        help="node-problem-detector custom plugin: at most 80 characters on "
                        "stdout")
    parser.add_argument("--slurm", action="store_true",
                        help="drain this Slurm node on failure with reason 'fleetcheck: CAUSE'; "
                        "resume it when healthy, only if fleetcheck drained it")
    parser.add_argument("--node", metavar="NAME",
                        help="the Slurm node name (default: $SLURMD_NODENAME, else hostname -s)")
    parser.add_argument("--drain-unverified", action="store_true",
                        help="with --slurm, also drain when the node could not be verified")
    options.add_max_out(parser, "with --slurm: never drain when that would take more than "
                        "SHARE (10%%) or N nodes of one of the node's partitions out at once; "
                        "the node is then left as it is")
    parser.add_argument("--python", metavar="PATH",
                        help="without --cache: the workload's interpreter to examine")
    options.add_playbook(parser, "without --cache: what counts as failing")
    options.add_timeout(parser, "without --cache: deadline for the probe (default: "
                        f"{DEFAULT_NODE_TIMEOUT:g})")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    bound = out_bound(args.max_out) if args.slurm else None
    probe = commands.ProbeRequest()
    if not args.cache:
        probe = commands.ProbeRequest(python=args.python, timeout=args.timeout,
                                      policy=load_policy(args.playbook))
    outcome = commands.health(commands.HealthRequest(
        cache=args.cache, max_age_s=args.max_age, probe=probe, npd=args.npd, slurm=args.slurm,
        node=args.node, drain_unverified=args.drain_unverified, bound=bound))
    say(outcome.notices)
    emit(outcome.line + "\n")
    return outcome.exit_code
