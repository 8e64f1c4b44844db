"""Queueing for a host's SSH sessions or the fleet's slots is not probe time (real sshd fleet)."""

from __future__ import annotations

import asyncio

import pytest

from fleetcheck.audit import run_audit
from fleetcheck.inventory import load_inventory
from fleetcheck.report.content import Report
from tests.audit.support import audit_until_deadline
from tests.fleet import Fleet

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]

GARBAGE = ("error", "probe output is not one JSON document: Expecting value "
                    "(output begins 'Welcome to container shell!')")


def audit(fleet: Fleet, **kwargs: object) -> Report:
    inventory = load_inventory(str(fleet.inventory))
    return asyncio.run(run_audit(inventory, **kwargs))  # type: ignore[arg-type]


def test_waiting_for_the_hosts_only_session_does_not_count_against_the_node(
    fleet: Fleet,
) -> None:
    # One session on the host: 102 waits until the hung 101 is killed at 23 s. Its own budget
    # (6 s, bounded at 6 + 5 + 10 s) must start once it holds the session, not while it waits;
    # 6 s leave its own run (a channel, the pct stand-in, one print) room on a busy machine.
    fleet.add_host("pve1", containers="listed", max_sessions=1)
    fleet.add_container("pve1", 101, "hang", timeout=23)
    fleet.add_container("pve1", 102, "garbage", timeout=6)
    fleet.write_inventory(timeout=30)

    report = audit(fleet)

    hung, waited = report.nodes
    assert (hung.id, hung.status, hung.reason) == (
        "pve1/101", "error", "probe timed out after 23 s")
    # It ran: its own output is judged, instead of "probe timed out after 6 s".
    assert (waited.id, waited.status, waited.reason) == ("pve1/102", *GARBAGE)
    # The 23 s spent waiting behind 101 are not its duration (its own run is bounded by 21 s).
    assert waited.duration_s is not None and waited.duration_s < 23


def test_a_saturated_host_does_not_hold_every_fleet_slot(fleet: Fleet) -> None:
    # Two fleet slots; pve1 runs one session at a time and both its nodes hang. Had each node
    # taken a fleet slot before its host's session, pve1 would hold both and pve2 would wait
    # until the audit's deadline.
    fleet.add_host("pve1", containers="listed", max_sessions=1)
    for vmid in (101, 102):
        fleet.add_container("pve1", vmid, "hang", timeout=60)
    fleet.add_host("pve2")
    fleet.add_container("pve2", 101, "healthy")
    fleet.write_inventory(timeout=60, concurrency=2)

    # The deadline passes once pve2/101 is done (had pve1 held both slots, it never would be).
    report = audit_until_deadline(fleet, {"pve2/101"})

    assert report.interrupted is True
    assert [(node.id, node.status, node.reason) for node in report.nodes] == [
        ("pve1/101", "error", "interrupted before the probe finished"),
        ("pve1/102", "error", "interrupted before the probe finished"),
        ("pve2/101", "ok", "Triton gpu (cuda)"),
    ]
    assert fleet.wait_no_leftovers(20) == []
