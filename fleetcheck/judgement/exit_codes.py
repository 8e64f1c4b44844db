"""Owns the exit codes of `audit`, `report`, `probe`, `merge`, `health` and `gate` (0/1/2/3, the
README's table) and the code a report gives; the command line's own (120, 130, 141) are
`cli/exits.py`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetcheck.judgement.statuses import GATE_UNVERIFIED, HEALTHY_STATUSES, UNVERIFIED_STATUSES

if TYPE_CHECKING:
    from fleetcheck.report.content import Report

#: Exit codes (the README's table): passed; a node failed; bad input or usage; unverified.
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_UNVERIFIED = 3


def exit_code_for(report: Report) -> int:
    """The documented exit code: 0 passed, 1 a node failed, 3 some nodes (or all) unverified."""
    statuses = {node.status for node in report.nodes}
    failed = "fail" in statuses or any(c.status == "fail" for c in report.fleet_checks)
    if failed:
        return EXIT_FAIL
    if statuses & UNVERIFIED_STATUSES or report.interrupted:
        return EXIT_UNVERIFIED
    if not statuses & HEALTHY_STATUSES:
        # Nothing was verified (no node, or every one skipped): not a pass.
        return EXIT_UNVERIFIED
    return EXIT_PASS


def gate_exit_code(report: Report) -> int:
    """0 every selected node verified and passing; 1 something failed; 3 some not verified.

    An empty selection verifies nothing, so it cannot pass: 3.
    """
    statuses = {node.status for node in report.nodes}
    if "fail" in statuses or any(check.status == "fail" for check in report.fleet_checks):
        return EXIT_FAIL
    if statuses & GATE_UNVERIFIED or report.interrupted or not report.nodes:
        return EXIT_UNVERIFIED
    return EXIT_PASS

