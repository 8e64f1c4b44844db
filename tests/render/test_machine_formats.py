"""JSON, JUnit and Prometheus renderings of the sample report: exact, parsed and checked."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.model import Check, NodeResult, Report
from fleetcheck.render import FORMATS, RenderError, render
from fleetcheck.reportio import report_from_dict

from .golden import assert_golden
from .sample import COMPILER_ERROR, ESCAPE_NAME, HTML_NAME, sample_report


def test_json_is_the_audit_contract_and_round_trips() -> None:
    text = render(sample_report(), "json")
    assert_golden("report.json", text)
    data = json.loads(text)
    assert data["schema"] == "fleetcheck.audit/1"
    assert data["summary"] == {"ok": 2, "skipped": 1, "warn": 1, "unreachable": 1, "error": 1,
                               "fail": 1}
    assert report_from_dict(data) == sample_report()


def test_junit_matches_golden_and_maps_outcomes() -> None:
    text = render(sample_report(), "junit")
    assert_golden("report.junit.xml", text)
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "96", "failures": "3", "errors": "2", "skipped": "1"}
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert list(suites) == ["pve1", "pve1/201", "pve1/202", "pve2", "pve3/300", "pve3/301",
                            "pve3/302", "fleet"]
    fallback = suites["pve1/201"]
    failed = [case.get("name") for case in fallback.findall("testcase")
              if case.find("failure") is not None]
    assert failed == ["node", "no_c_compiler", "triton_target"]
    failure = fallback.find("testcase[@name='no_c_compiler']/failure")
    assert failure is not None
    assert failure.get("message") == "no C compiler: CC unset, no gcc or clang on PATH"
    assert failure.text is not None and f"error: {COMPILER_ERROR}" in failure.text
    unreachable = suites["pve2"].find("testcase[@name='node']/error")
    assert unreachable is not None and unreachable.get("type") == "unreachable"
    skipped = suites["pve3/300"].find("testcase[@name='node']/skipped")
    assert skipped is not None and skipped.get("message") == "container 300 is stopped"
    names = {p.get("value") for p in root.iter("property") if p.get("name") == "name"}
    # The escape character is illegal in XML 1.0: it is dropped, the rest kept as text.
    assert HTML_NAME in names and "[31mred[bold]x" in names and ESCAPE_NAME not in names


def test_junit_removes_every_xml_illegal_character() -> None:
    nasty = "".join(chr(c) for c in range(0x20)) + "\ufffe\uffff end"
    node = NodeResult("h", "h", None, nasty, "fail", nasty,
                      checks=(Check("no_c_compiler", "fail", nasty, nasty, {nasty: nasty}),))
    text = render(Report("t0", "t1", (node,)), "junit")
    root = ET.fromstring(text.encode("utf-8"))
    failure = root.find("testsuite/testcase[@name='no_c_compiler']/failure")
    assert failure is not None
    assert failure.get("message") == "\t\n\r end"


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


def test_every_format_renders_and_unknown_formats_are_refused() -> None:
    for fmt in FORMATS:
        assert render(sample_report(), fmt, color=False)
    with pytest.raises(RenderError, match="unknown format 'yaml'; choose one of table, html"):
        render(sample_report(), "yaml")
