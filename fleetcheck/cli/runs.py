"""What the commands that run an audit share: its request from their options, the progress
bar while it runs, and the end of an audit or a merge (notices, the report written, the run
kept, the exit code)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fleetcheck.cli.output import emit, file_options, output_format, say

if TYPE_CHECKING:
    from fleetcheck.commands import AuditOutcome, AuditRequest
    from fleetcheck.inventory_data.model import Inventory
    from fleetcheck.judgement.policy import Policy

Outcome = TypeVar("Outcome")


def audit_request(args: argparse.Namespace, inventory: Inventory, policy: Policy,
                  limit: Sequence[str], **extra: Any) -> AuditRequest:
    from fleetcheck.commands import AuditRequest

    return AuditRequest(inventory, policy, limit=tuple(limit or ()), timeout=args.timeout,
                        parts=args.parts, **extra)


def with_progress(enabled: bool, call: Callable[[Any], Outcome], request: Any) -> Outcome:
    """`call(request)` with a progress bar on stderr when it is a terminal and `enabled`."""
    from fleetcheck.render.progress import progress_observer

    with progress_observer(sys.stderr, enabled=enabled) as observer:
        return call(dataclasses.replace(request, observer=observer))


def finish_run(outcome: AuditOutcome, args: argparse.Namespace) -> int:
    """An audit's or a merge's outcome: notices, the report, the history kept, the code."""
    say(outcome.notices)
    emit(outcome.render(output_format(args.format, args.output), **file_options(args.output)),
         args.output)
    say(outcome.record())
    if outcome.limit_error:
        say([f"error: {outcome.limit_error}"])
    return int(outcome.exit_code)
