"""The framework outcomes a real probe document carries, as the reports and the gate show them."""

from __future__ import annotations

import json
from pathlib import Path

from fleetcheck.judgement.frameworks import framework_outcomes, frameworks_badge
from fleetcheck.judgement.gate import gate_json, gate_lines
from fleetcheck.render.html import render_html
from fleetcheck.render.json import render_json
from fleetcheck.render.terminal import render_terminal
from fleetcheck.report.content import Report, TritonVerdict
from tests.fix.support import probed

BADGE = "FLA cpu-fallback, vLLM cpu-fallback, inductor fails-at-kernel"
#: vLLM's own HAS_TRITON passes (one active driver); its vendored FLA detection falls back.
VLLM_LINE = ("vLLM: its copy of FLA's detection (catches (RuntimeError, AttributeError): "
             "silent) says cpu, and logs nothing")


def _report(tmp_path: Path) -> Report:
    # Judged as the audit judges a node: the scheduler's own node_from_result.
    node = probed(tmp_path / "node", "gpu01", compiler=False, fla="0.6.0", vllm="0.33.0")
    assert isinstance(node.triton, TritonVerdict)
    return Report(started_at="2026-12-01T14:00:00Z", finished_at="2026-12-01T14:00:05Z",
                  nodes=(node,))


def test_framework_outcomes_in_every_report(tmp_path: Path) -> None:
    report = _report(tmp_path)
    node = report.nodes[0]
    assert frameworks_badge(node.facts) == BADGE
    details = {item.label: item.detail for item in framework_outcomes(node.facts)}
    assert details["vLLM"] == VLLM_LINE
    # JSON: the facts carry them (the contract extended, nothing renamed).
    node_json = json.loads(render_json(report))["nodes"][0]
    assert node_json["facts"]["frameworks"]["fla"]["outcome"] == "cpu-fallback"
    assert node_json["facts"]["fla"]["swallowed"].startswith("RuntimeError: Failed to find C")
    # Terminal: one line each under the node's cause and fix.
    text = render_terminal(report, width=200)
    assert "  FLA: FLA 0.6.0 falls back to CPU: RuntimeError: Failed to find C compiler." in text
    assert "  vLLM: " + VLLM_LINE in text
    assert "  inductor: torch.compile (inductor): BackendCompilerFailed at code generation" in text
    # HTML: a badge per framework in the node's matrix cell, one line each under its cause.
    html = render_html(report)
    assert '<span class="badge fw st-fail" title="FLA 0.6.0 falls back to CPU' in html
    assert ">FLA cpu-fallback</span>" in html and ">vLLM cpu-fallback</span>" in html
    assert "<li class=\"st-fail\"><b>inductor:</b> torch.compile (inductor)" in html
    # Gate: the blocking node names the outcomes.
    assert gate_json(report)["blocking"][0]["frameworks"] == BADGE
    assert gate_lines(report)[0].endswith(f"[{BADGE}]")


def test_no_framework_facts_adds_nothing() -> None:
    assert framework_outcomes({}) == [] and frameworks_badge({"frameworks": None}) == ""


def test_the_gate_names_only_frameworks_that_will_not_run() -> None:
    facts = {"frameworks": {
        "fla": {"installed": True, "outcome": "gpu", "detail": "FLA 0.6.0 runs on the GPU"},
        "vllm": {"installed": False, "outcome": "not-installed", "detail": "vLLM not installed"},
        "inductor": {"installed": True, "outcome": "cpu-only", "detail": "no CUDA device"}}}
    assert frameworks_badge(facts) == "FLA gpu, inductor cpu-only"
    assert frameworks_badge(facts, problems_only=True) == "inductor cpu-only"
