"""The JUnit rendering of the sample report: exact, parsed, outcomes mapped, XML-safe."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fleetcheck.render import render
from fleetcheck.report.content import Check, NodeResult, Report

from .golden import assert_golden
from .sample import COMPILER_ERROR, ESCAPE_NAME, HTML_NAME, sample_report


def test_junit_matches_golden_and_maps_outcomes() -> None:
    text = render(sample_report(), "junit")
    assert_golden("report.junit.xml", text)
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "108", "failures": "3", "errors": "2", "skipped": "1"}
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
