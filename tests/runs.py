"""Constructed reports for the history and diff tests: a node, a nightly run of nodes."""

from __future__ import annotations

from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from fleetcheck.report.reportio import report_to_dict
from tests.contracts import validated


def node(node_id: str, status: str = "ok", verdict: str = "gpu", torch: str = "2.5.1",
         reason: str = "") -> NodeResult:
    return NodeResult(
        node_id, node_id.split("/")[0], None, node_id, status, reason or f"{status} reason",
        triton=TritonVerdict(verdict), facts={"torch": {"version": torch}, "gpu_count": 8},
    )


def run(day: int, *nodes: NodeResult, fleet: tuple[Check, ...] = ()) -> Report:
    stamp = f"2026-12-{day:02d}T02:15:00Z"
    report = Report(stamp, stamp, nodes, fleet_checks=fleet)
    validated(report_to_dict(report))
    return report
