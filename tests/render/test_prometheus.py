"""The Prometheus rendering of the sample report: exact, parsed by prometheus_client, escaped."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.render import render
from fleetcheck.report.content import NodeResult, Report

from .golden import assert_golden
from .sample import HTML_NAME, sample_report


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def test_prometheus_matches_golden_and_parses() -> None:
    text = render(sample_report(), "prometheus")
    assert_golden("report.prom", text)
    families = _families(text)
    assert families["fleetcheck_audit_timestamp_seconds"] == [({}, 1748743242.0)]
    assert families["fleetcheck_audit_duration_seconds"] == [({}, 42.0)]
    assert families["fleetcheck_triton_fallback"] == [
        ({"node": "pve1", "cause": ""}, 0.0),
        ({"node": "pve1/201", "cause": "no_c_compiler"}, 1.0),
        ({"node": "pve1/202", "cause": ""}, 0.0),
        ({"node": "pve3/301", "cause": ""}, 0.0),
    ]
    statuses = {(labels["node"], labels["status"]): value
                for labels, value in families["fleetcheck_node_status"]}
    assert len(statuses) == 7 * 6
    assert [key for key, value in statuses.items() if value == 1] == [
        ("pve1", "ok"), ("pve1/201", "fail"), ("pve1/202", "warn"), ("pve2", "unreachable"),
        ("pve3/300", "skipped"), ("pve3/301", "ok"), ("pve3/302", "error")]
    assert dict((labels["status"], value) for labels, value in families["fleetcheck_nodes"]) == {
        "ok": 2, "skipped": 1, "warn": 1, "unreachable": 1, "error": 1, "fail": 1}
    assert families["fleetcheck_node_gpus"] == [
        ({"node": "pve1"}, 8.0), ({"node": "pve1/201"}, 2.0), ({"node": "pve1/202"}, 4.0),
        ({"node": "pve3/301"}, 1.0)]
    names = [labels["name"] for labels, _ in families["fleetcheck_node_info"]]
    assert names[-2:] == [HTML_NAME, "\\x1b[31mred[bold]x"]
    assert "\x1b" not in text


def test_prometheus_escapes_label_values() -> None:
    node = NodeResult('h"1', 'h\\"\n', None, 'a"b\\c\nd', "ok", "")
    text = render(Report("2025-01-01T00:00:00+00:00", "bad", (node,)), "prometheus")
    assert 'fleetcheck_node_info{node="h\\"1",host="h\\\\\\"\\n",name="a\\"b\\\\c\\nd"} 1' in text
    info = _families(text)["fleetcheck_node_info"]
    assert info == [({"node": 'h"1', "host": 'h\\"\n', "name": 'a"b\\c\nd'}, 1.0)]
    # An unparseable finish time leaves the timestamp out rather than inventing one.
    assert "fleetcheck_audit_timestamp_seconds" not in text


def test_per_gpu_gauges_memory_foreign_processes_pending_remaps() -> None:
    samples = {(s.name, s.labels.get("node"), s.labels.get("gpu")): s.value
               for family in text_string_to_metric_families(render(sample_report(), "prometheus"))
               for s in family.samples if s.name.startswith("fleetcheck_gpu_")}
    assert samples[("fleetcheck_gpu_memory_used_bytes", "pve1/202", "2")] == 119808 << 20
    assert samples[("fleetcheck_gpu_memory_total_bytes", "pve1/202", "2")] == 143771 << 20
    assert samples[("fleetcheck_gpu_foreign_processes", "pve1/202", "2")] == 1
    assert samples[("fleetcheck_gpu_foreign_processes", "pve1/202", "0")] == 0
    assert samples[("fleetcheck_gpu_remap_pending", "pve1", "7")] == 0
    # 8 GPUs of pve1 and 4 of pve1/202, four gauges each; nodes without the GPU state none.
    assert len(samples) == 12 * 4
