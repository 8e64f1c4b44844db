"""`fleetcheck gate`: the pre-job check, one exit code and the blocking nodes on stderr, from a
probe of the inventory now or from the node documents the job's nodes wrote."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from fleetcheck.cli import options
from fleetcheck.cli.inputs import load_inventory, load_policy
from fleetcheck.cli.options import UsageError
from fleetcheck.cli.output import emit, say
from fleetcheck.cli.runs import audit_request

if TYPE_CHECKING:
    from fleetcheck.commands import GateOutcome

NAME = "gate"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="pre-job gate: one exit code, blocking nodes on stderr",
        description="Probe the selected nodes and exit 0 only if all of them may run the job. "
        "Blocking nodes are printed on stderr, one line each: node, cause, fix.",
        **options.WITH_EXIT_CODES,
    )
    parser.add_argument("inventory", nargs="?", default=None,
                        help="inventory YAML (not with --documents)")
    options.add_selection(parser)
    parser.add_argument("--nodes", metavar="HOSTLIST",
                        help="gate exactly these hosts as one job's node set: a Slurm hostlist "
                        "(gpu[01-08], $SLURM_JOB_NODELIST); each must be a host of the "
                        "inventory; the playbook's consistency checks run across them "
                        "(instead of --limit)")
    parser.add_argument("--documents", action="append", default=None, metavar="PATH",
                        help="with --nodes, instead of an inventory: gate from the node "
                        "documents the nodes wrote (`fleetcheck probe --format json`, or the "
                        "bare probe script's output; files, folders, tarballs, as for "
                        "`merge`), probing nothing; a node without a document, or with one "
                        "older than --max-age, is unverified")
    options.add_max_age(parser, "with --documents: oldest document that counts")
    options.add_playbook(parser, "requirements (default: the built-in pre-training playbook)",
                         default="pre-training")
    parser.add_argument("--json", action="store_true", help="print a JSON verdict on stdout")
    options.add_timeout(parser, "deadline for the whole gate")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    if args.documents is not None:
        return _from_documents(args)
    if args.inventory is None:
        raise UsageError("gate needs an INVENTORY, or --documents PATH with --nodes")
    if args.max_age is not None:
        raise UsageError("--max-age goes with --documents (a probe is never stale)")
    inventory = load_inventory(args.inventory)
    policy = load_policy(args.playbook)
    limit = args.limit
    if args.nodes is not None:
        from fleetcheck.judgement.gate import job_limit

        if args.limit:
            raise UsageError("--nodes and --limit: give one (--nodes is the job's node set)")
        limit = [job_limit(args.nodes, inventory)]
    return _finish(commands.gate(audit_request(args, inventory, policy, limit)), args)


def _from_documents(args: argparse.Namespace) -> int:
    """`gate --documents PATH --nodes HOSTLIST`: the gate over gathered node documents."""
    from fleetcheck import commands

    if args.inventory is not None or args.limit:
        raise UsageError("--documents replaces the inventory and --limit: give --nodes only")
    if args.nodes is None:
        raise UsageError("--documents needs --nodes HOSTLIST (the job's nodes)")
    policy = load_policy(args.playbook)
    return _finish(commands.gate_documents(commands.GateDocumentsRequest(
        args.documents, args.nodes, policy, max_age_s=args.max_age)), args)


def _finish(outcome: GateOutcome, args: argparse.Namespace) -> int:
    """A gate's outcome: notices, one line per blocking node, the JSON verdict, the code."""
    import json

    say(outcome.notices)
    say(outcome.lines, prefix="")
    if args.json:
        emit(json.dumps(outcome.json(), indent=2) + "\n")
    if outcome.limit_error:
        say([f"error: {outcome.limit_error}"])
    return int(outcome.exit_code)
