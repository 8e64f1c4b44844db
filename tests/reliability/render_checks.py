"""Render a report in every format and check that node strings were neutralised."""

from __future__ import annotations

import json
import re
import xml.dom.minidom
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.render import render
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict

STATUSES = ("ok", "warn", "fail", "error", "unreachable", "skipped")
# Colour codes the table renderer draws itself; anything else with ESC came from a node.
_OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_report(text: str) -> Report:
    """A report carrying `text` in every string a node or the inventory can set."""
    nodes = []
    for index, status in enumerate(STATUSES):
        check = Check(f"check_{index}", "fail", text, text, {"error": text, text[:50]: [text]})
        nodes.append(NodeResult(
            id=f"pve1/{100 + index}", host="pve1", vmid=100 + index, name=text, status=status,
            reason=text,
            triton=TritonVerdict("cpu-fallback", text, "no_c_compiler", text),
            checks=(check, Check("gpu_present", "pass", text)),
            facts={"hostname": text, "driver": {"userspace": text}, "gpus": [{"name": text}],
                   "torch": {"version": text}, text[:40]: text},
            duration_s=1.5, labels=("gpu",),
        ))
    nodes.append(NodeResult(id="pve2", host="pve2", vmid=None, name="pve2", status="unreachable",
                            reason=text))
    return Report("2026-01-02T03:04:05Z", "2026-01-02T03:04:09Z", tuple(nodes),
                  inventory=text, playbook="default",
                  fleet_checks=(Check("consistent_driver", "warn", text, text),))


class _Tags(HTMLParser):
    """Start tags and attribute names, and attribute values that could run script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attrs.add(name)
            if name in ("href", "src", "action") and value:
                self.urls.append(value)


def _tags(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    parser.close()
    return parser


_BASELINE: dict[str, _Tags] = {}


def _baseline_html() -> _Tags:
    if "html" not in _BASELINE:
        _BASELINE["html"] = _tags(render(hostile_report("benign text"), "html"))
    return _BASELINE["html"]


def check_table(report: Report, text: str) -> None:
    for color in (False, True):
        out = render(report, "table", width=120, color=color)
        stripped = _OWN_SGR.sub("", out) if color else out
        assert "\x1b" not in stripped, repr(stripped[:300])
        bad = _TERMINAL_CONTROLS.search(stripped)
        assert bad is None, f"raw control {bad.group(0)!r} in the table"


def check_html(report: Report, text: str) -> None:
    out = render(report, "html")
    found = _tags(out)
    baseline = _baseline_html()
    assert found.tags <= baseline.tags, f"new tags: {found.tags - baseline.tags}"
    assert found.attrs <= baseline.attrs, f"new attributes: {found.attrs - baseline.attrs}"
    assert not [u for u in found.urls if u.strip().lower().startswith("javascript:")]
    for raw in ("<script>alert", "<img src=x", "<h1>injected"):
        assert raw not in out, raw


def check_junit(report: Report, text: str) -> None:
    out = render(report, "junit")
    ET.fromstring(out.encode("utf-8"))
    xml.dom.minidom.parseString(out.encode("utf-8"))


def check_prometheus(report: Report, text: str) -> None:
    out = render(report, "prometheus")
    families = list(text_string_to_metric_families(out))
    assert families
    for family in families:
        assert family.name.startswith("fleetcheck"), family.name
        for sample in family.samples:
            assert sample.name.startswith("fleetcheck"), sample.name


def check_json(report: Report, text: str) -> None:
    out = render(report, "json")
    data = json.loads(out)
    assert not text or data["nodes"][0]["reason"] == text
    out.encode("utf-8")


CHECKERS = {
    "table": check_table,
    "html": check_html,
    "junit": check_junit,
    "prometheus": check_prometheus,
    "json": check_json,
}
