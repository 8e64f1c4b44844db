"""What changed between two runs: failures, recoveries, drift, verdicts, nodes come and gone."""

from __future__ import annotations

from typing import Any

from fleetcheck.report.content import Check, NodeResult, TritonVerdict
from fleetcheck.report.rundiff import Change, diff_reports
from tests.runs import node, run


def test_diff_names_failures_recoveries_drift_verdicts_and_nodes_come_and_gone() -> None:
    old = run(1, node("pve1"), node("pve1/101"), node("pve2", "fail", "cpu-fallback"),
              node("pve3"), node("pve4", "ok"))
    new = run(2, node("pve1", torch="2.6.0"),
              node("pve1/101", "fail", "cpu-fallback", reason="Triton cpu-fallback: no cc"),
              node("pve2"), node("pve4", "unreachable", "unknown"), node("pve5"))
    diff = diff_reports(old, new)
    assert diff.changed
    assert diff.changes == (
        Change("new-failure", "pve1/101", "ok", "fail", "Triton cpu-fallback: no cc"),
        Change("recovered", "pve2", "fail", "ok", ""),
        Change("status", "pve4", "ok", "unreachable", "unreachable reason"),
        Change("verdict", "pve1/101", "gpu", "cpu-fallback", ""),
        Change("verdict", "pve2", "cpu-fallback", "gpu", ""),
        Change("verdict", "pve4", "gpu", "unknown", ""),
        Change("version", "pve1", "2.5.1", "2.6.0", "torch version"),
        Change("appeared", "pve5", None, "ok", ""),
        Change("gone", "pve3", "ok", None, ""),
    )
    assert diff.lines() == [
        "9 change(s) from 2026-12-01T02:15:00Z to 2026-12-02T02:15:00Z:",
        "  new failure: pve1/101: ok -> fail: Triton cpu-fallback: no cc",
        "  recovered: pve2: fail -> ok",
        "  status: pve4: ok -> unreachable: unreachable reason",
        "  Triton verdict: pve1/101: gpu -> cpu-fallback",
        "  Triton verdict: pve2: cpu-fallback -> gpu",
        "  Triton verdict: pve4: gpu -> unknown",
        "  version: pve1: torch version 2.5.1 -> 2.6.0",
        "  new node: pve5 (ok)",
        "  node gone: pve3 (was ok)",
    ]


def test_no_change_and_facts_missing_on_one_side_is_not_drift() -> None:
    unreachable = NodeResult("pve1", "pve1", None, "pve1", "ok", "ok reason",
                             triton=TritonVerdict("gpu"), facts={})
    diff = diff_reports(run(1, node("pve1")), run(2, unreachable))
    assert not diff.changed
    assert diff.lines() == ["no changes from 2026-12-01T02:15:00Z to 2026-12-02T02:15:00Z"]


def test_fleet_findings_appear_and_clear() -> None:
    drift = Check("fleet_driver_mismatch", "fail", "NVIDIA driver differs", "same driver")
    diff = diff_reports(run(1, fleet=(drift,)), run(2))
    assert diff.changes == (Change("fleet", "fleet_driver_mismatch", "fail", "pass", ""),)
    back = diff_reports(run(2), run(3, fleet=(drift,)))
    assert back.lines()[1] == "  fleet: fleet_driver_mismatch: pass -> fail: NVIDIA driver differs"


def test_diff_json_shape() -> None:
    data: dict[str, Any] = diff_reports(run(1, node("a")), run(2)).to_dict()
    assert data == {
        "schema": "fleetcheck.diff/1", "old_started_at": "2026-12-01T02:15:00Z",
        "new_started_at": "2026-12-02T02:15:00Z", "changed": True,
        "changes": [{"kind": "gone", "node": "a", "old": "ok", "new": None, "detail": ""}],
    }


def test_hostile_reason_in_diff_text_is_one_printable_line() -> None:
    evil = node("a", "fail", reason="boom\n\x1b[31mred")
    assert diff_reports(run(1, node("a")), run(2, evil)).lines()[1] == (
        "  new failure: a: ok -> fail: boom \\x1b[31mred")
