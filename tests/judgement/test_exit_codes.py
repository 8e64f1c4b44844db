"""The exit-code contract: what a report's statuses and fleet checks make an audit exit with."""

from __future__ import annotations

import pytest

from fleetcheck.judgement.exit_codes import exit_code_for
from fleetcheck.report.content import Check, NodeResult, Report


def node(node_id: str, status: str) -> NodeResult:
    host, _, vmid = node_id.partition("/")
    return NodeResult(id=node_id, host=host, vmid=int(vmid) if vmid else None, name=node_id,
                      status=status, reason=status)


def report(*statuses: str, interrupted: bool = False) -> Report:
    nodes = tuple(node(f"pve1/{100 + i}", s) for i, s in enumerate(statuses))
    return Report("2026-12-01T00:00:00Z", "2026-12-01T00:00:05Z", nodes, interrupted=interrupted)


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ((), 3),
        (("skipped", "skipped"), 3),
        (("ok", "warn", "skipped"), 0),
        (("ok", "fail"), 1),
        (("fail", "unreachable", "error"), 1),
        (("ok", "unreachable"), 3),
        (("warn", "error"), 3),
    ],
)
def test_exit_codes_follow_the_design(statuses: tuple[str, ...], code: int) -> None:
    assert exit_code_for(report(*statuses)) == code


def test_interrupted_audit_is_unverified_unless_something_failed() -> None:
    assert exit_code_for(report("ok", interrupted=True)) == 3
    assert exit_code_for(report("fail", interrupted=True)) == 1


def test_failing_fleet_check_fails_the_audit() -> None:
    base = report("ok", "ok")
    failing = Report(base.started_at, base.finished_at, base.nodes,
                     fleet_checks=(Check("fleet_driver_mismatch", "fail", "drivers differ"),))
    assert exit_code_for(failing) == 1
