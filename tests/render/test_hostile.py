"""Any node data, however malformed or hostile, renders in every format without leaking controls."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.model import Report
from fleetcheck.render import render
from fleetcheck.render.sanitize import prometheus_label, terminal_line
from fleetcheck.reportio import node_from_dict

ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

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


@given(st.text())
def test_terminal_line_leaves_no_control_character(text: str) -> None:
    assert not CONTROL.search(terminal_line(text).replace("\n", "\x00"))
    assert "\n" not in terminal_line(text)


#: What prometheus_label shows escaped on purpose, so `cat` of the textfile stays harmless:
#: controls, surrogates, line/paragraph separators and the bidi/format controls.
_NEUTRALISED = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"),
                                      blacklist_characters=_NEUTRALISED)))
def test_prometheus_labels_round_trip_printable_text(text: str) -> None:
    exposition = f'm{{l="{prometheus_label(text)}"}} 1\n'
    (family,) = text_string_to_metric_families(exposition)
    assert family.samples[0].labels == {"l": text}


def test_prometheus_labels_show_separators_and_bidi_controls_escaped() -> None:
    label = prometheus_label("a\u2028b\u202ec")
    exposition = f'm{{l="{label}"}} 1\n'
    (family,) = text_string_to_metric_families(exposition)
    assert family.samples[0].labels == {"l": "a\\u2028b\\u202ec"}
