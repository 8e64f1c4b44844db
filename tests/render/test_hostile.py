"""Any node data, however malformed or hostile, renders in every format without leaking controls."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.render import render
from fleetcheck.report.content import Report
from fleetcheck.report.reportio import node_from_dict

from .sample import CONTROL

ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
fact_keys = st.sampled_from(["gpus", "gpu_count", "driver", "torch", "compiler", "fla", "os"])
nodes = st.fixed_dictionaries({
    "id": st.text(), "host": st.text(), "name": st.text(), "reason": st.text(),
    "status": st.sampled_from(["ok", "warn", "fail", "error", "unreachable", "skipped", "??"]),
    "triton": st.fixed_dictionaries({
        "verdict": st.sampled_from(["gpu", "cpu-fallback", "unknown", "x"]),
        "cause": st.none() | st.text(), "fix": st.text()}),
    "checks": st.lists(st.fixed_dictionaries({
        "id": st.sampled_from(["no_c_compiler", "gpu_present", "triton_target", "bogus"]),
        "status": st.sampled_from(["pass", "warn", "fail", "skip", "error", "??"]),
        "summary": st.text(), "fix": st.text(),
        "evidence": st.dictionaries(st.text(), json_values, max_size=2)}), max_size=3),
    "facts": st.dictionaries(fact_keys, json_values, max_size=4),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(nodes, min_size=1, max_size=3))
def test_every_format_survives_arbitrary_nodes(raw_nodes: list[dict[str, object]]) -> None:
    report = Report("2025-06-01T02:00:00Z", "2025-06-01T02:00:01Z",
                    tuple(node_from_dict(raw) for raw in raw_nodes))
    table = render(report, "table", width=70, color=True)
    assert not CONTROL.search(ANSI_SGR.sub("", table).replace("\x1b", "\x00"))
    html = render(report, "html")
    assert not CONTROL.search(html)
    ET.fromstring(render(report, "junit").encode("utf-8"))
    families = list(text_string_to_metric_families(render(report, "prometheus")))
    assert families[0].name == "fleetcheck_audit_timestamp_seconds"
    assert json.loads(render(report, "json"))["schema"] == "fleetcheck.audit/1"
