"""`fleetcheck fix`: the repair plan of every failing node; with --apply, run it (once asked)
and probe the nodes again."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from fleetcheck.cli import confirm, options
from fleetcheck.cli.inputs import load_inventory, load_policy, out_bound
from fleetcheck.cli.output import check_history, check_output, emit, say
from fleetcheck.cli.runs import with_progress

if TYPE_CHECKING:
    from fleetcheck.commands import FixPlanned, FixRequest

NAME = "fix"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="plan the repair of every failing node; --apply runs it and probes again",
        description="Print, per failing node, its cause, the exact commands for its "
        "distribution, where they run (as root, inside the node, through the node's "
        "transport) and what is left to the host's admin or a person. Nothing changes "
        "without --apply. With --apply the plans run (each node's stops at its first failing "
        "command), the nodes are probed again and the before -> after table is printed; "
        "the exit code is the audit's, for the after-state.",
        **options.WITH_EXIT_CODES,
    )
    parser.add_argument("source", metavar="INVENTORY|RESULTS.json",
                        help="an inventory (probed first) or a saved audit JSON (.json, "
                        ".json.gz; --apply reaches its nodes through the inventory it names)")
    options.add_selection(parser)
    parser.add_argument("--apply", action="store_true",
                        help="run the safe, local steps as root on the nodes, then probe them "
                        "again")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="with --apply: do not ask (needed when stdin is not a terminal)")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write the JSON record of the plan and of what ran where "
                        "(atomically)")
    options.add_playbook(parser)
    options.add_timeout(parser, "deadline for each phase (the first probe; the repair and the "
                        "probe after it)")
    parser.add_argument("--history", metavar="DIR",
                        help="with --apply: keep the after-probe in DIR like any audit")
    options.add_max_out(parser, "with --apply: refuse (changing nothing) to repair more than "
                        "SHARE (10%%) or N of the selected nodes at once; narrow the selection "
                        "with --limit or raise it")
    options.add_no_progress(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands
    from fleetcheck.fix.render import render_plan

    request = commands.FixRequest(
        args.source, limit=tuple(args.limit), apply=args.apply, timeout=args.timeout,
        history=args.history, parts=args.parts, load_inventory=load_inventory)
    request.check()
    if args.apply:
        confirm.check_can_ask(args.yes, "--apply")
    check_output(args.output)
    if args.history:
        check_history(args.history)
    request = dataclasses.replace(request, bound=out_bound(args.max_out),
                                  policy=load_policy(args.playbook))
    planned = with_progress(not args.no_progress, commands.fix_plan, request)
    say(planned.notices)
    emit(render_plan(planned.plan, apply=planned.applying))
    if planned.applying and confirm.confirmed(
            f"Run these {planned.command_count} command(s) as root on "
            f"{len(planned.runnable)} node(s)? [y/N] ", assume_yes=args.yes):
        return _apply(planned, request, args)
    if planned.applying:
        say(["nothing was changed"])
    _write_record(args.output, planned.record())
    return planned.exit_code


def _apply(planned: FixPlanned, request: FixRequest, args: argparse.Namespace) -> int:
    """Run the plan, probe the nodes again, print the before -> after table; the record is
    written however the run ends."""
    from fleetcheck import commands
    from fleetcheck.fix.render import render_outcomes
    from fleetcheck.render.progress import progress_observer

    planned.request = dataclasses.replace(request, observer=None)
    with progress_observer(sys.stderr, enabled=not args.no_progress) as observer:
        outcome = commands.fix_apply(
            planned, observer=observer,
            on_record=lambda record: _write_record(args.output, record))
    emit("\n" + render_outcomes(outcome.outcomes))
    say(outcome.notices)
    return outcome.exit_code


def _write_record(output: str | None, record: dict[str, Any]) -> None:
    """The `fleetcheck.fix/1` record, to -o FILE when given."""
    if output is not None:
        import json

        emit(json.dumps(record, indent=2, ensure_ascii=False) + "\n", output)
