"""JUnit XML for CI dashboards: a test suite per node, a test case per check and per node."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from fleetcheck.render.matrix import display_name
from fleetcheck.render.sanitize import as_text, xml_text
from fleetcheck.report.content import Check, NodeResult, Report

#: How a check status shows in JUnit; warnings pass (JUnit has no warning) but keep their text.
CHECK_OUTCOMES = {
    "pass": None,
    "warn": None,
    "fail": "failure",
    "error": "error",
    "skip": "skipped",
}
#: How a node status shows in the node's own test case.
NODE_OUTCOMES = {
    "ok": None,
    "warn": None,
    "fail": "failure",
    "error": "error",
    "unreachable": "error",
    "skipped": "skipped",
}


def _details(summary: str, fix: str, evidence: Mapping[str, Any]) -> str:
    lines = [summary]
    lines += [f"{key}: {as_text(value)}" for key, value in evidence.items()]
    if fix:
        lines.append(f"fix: {fix}")
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, name: str, time: float = 0.0) -> ET.Element:
    return ET.SubElement(
        suite,
        "testcase",
        {"classname": xml_text(classname), "name": xml_text(name), "time": f"{time:.3f}"},
    )


def _outcome(case: ET.Element, kind: str | None, message: str, details: str, type_: str) -> None:
    if kind is None:
        if details:
            ET.SubElement(case, "system-out").text = xml_text(details)
        return
    attrs = {"message": xml_text(message)}
    if kind != "skipped":
        attrs["type"] = xml_text(type_)
    ET.SubElement(case, kind, attrs).text = xml_text(details) if details else None


def _check_case(suite: ET.Element, classname: str, check: Check) -> str | None:
    case = _case(suite, classname, check.id)
    kind = CHECK_OUTCOMES.get(check.status, "error")
    text = _details(check.summary, check.fix, check.evidence) if check.status != "pass" else ""
    _outcome(case, kind, check.summary, text, check.id)
    return kind


def _node_suite(root: ET.Element, node: NodeResult, timestamp: str) -> None:
    suite = ET.SubElement(root, "testsuite", {"name": xml_text(node.id)})
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("name", node.name),
        ("host", node.host),
        ("status", node.status),
        ("triton.verdict", node.triton.verdict),
        ("triton.cause", node.triton.cause or ""),
    ):
        ET.SubElement(props, "property", {"name": key, "value": xml_text(value)})
    kinds: list[str | None] = []
    node_case = _case(suite, node.id, "node", node.duration_s)
    kind = NODE_OUTCOMES.get(node.status, "error")
    fix = node.triton.fix if node.triton.verdict == "cpu-fallback" else ""
    details = f"{display_name(node)}: {node.reason}" + (f"\nfix: {fix}" if fix else "")
    _outcome(node_case, kind, node.reason, details if kind else "", node.status)
    kinds.append(kind)
    for check in node.checks:
        kinds.append(_check_case(suite, node.id, check))
    _count(suite, kinds, timestamp, node.duration_s)


def _count(suite: ET.Element, kinds: list[str | None], timestamp: str, time: float) -> None:
    suite.set("tests", str(len(kinds)))
    for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attr, str(kinds.count(kind)))
    suite.set("time", f"{time:.3f}")
    suite.set("timestamp", xml_text(timestamp))


def render_junit(report: Report) -> str:
    """The report as a JUnit `<testsuites>` document (UTF-8, XML-illegal characters removed)."""
    root = ET.Element("testsuites", {"name": "fleetcheck"})
    for node in report.nodes:
        _node_suite(root, node, report.started_at)
    if report.fleet_checks:
        suite = ET.SubElement(root, "testsuite", {"name": "fleet"})
        kinds = [_check_case(suite, "fleet", check) for check in report.fleet_checks]
        _count(suite, kinds, report.started_at, 0.0)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.findall("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
