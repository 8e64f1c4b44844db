"""What the options name, read for a command: the playbook, an inventory (its warnings said at
once), `--max-out`, and the history options, checked together before anything is probed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fleetcheck.cli.options import UsageError
from fleetcheck.cli.output import check_history, check_output, say

if TYPE_CHECKING:
    from fleetcheck.commands import Keeping
    from fleetcheck.inventory_data.model import Inventory
    from fleetcheck.judgement.policy import Policy
    from fleetcheck.outbound import OutBound


def load_policy(name: str | None) -> Policy:
    from fleetcheck.playbook import load_playbook

    return load_playbook(name)


def load_inventory(path: str) -> Inventory:
    """The inventory at `path`; its warnings on stderr before anything else runs."""
    from fleetcheck.inventory import load_inventory as load

    inventory = load(path)
    say([f"warning: {warning}" for warning in inventory.warnings])
    return inventory


def out_bound(text: str | None) -> OutBound:
    """--max-out's bound, the default when not given."""
    from fleetcheck.outbound import DEFAULT_OUT_BOUND, OutBoundError, parse_out_bound

    try:
        return parse_out_bound(text if text is not None else DEFAULT_OUT_BOUND)
    except OutBoundError as exc:
        raise UsageError(f"--max-out {exc}") from None


def keeping(args: argparse.Namespace) -> Keeping:
    """--history, --keep, --on-change (and -o): checked before anything is read or probed."""
    from fleetcheck.commands import Keeping

    if args.on_change and not args.history:
        raise UsageError("--on-change needs --history DIR (changes are found against the last run)")
    if args.keep is not None and not args.history:
        raise UsageError("--keep needs --history DIR (it is how many runs the history keeps)")
    check_output(args.output)
    if args.history:
        check_history(args.history)
    return Keeping(args.history, args.on_change, args.keep)
