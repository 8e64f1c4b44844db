"""Owns what each framework will do on a node (the probe's facts.frameworks) as reports show it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Frameworks in display order, with the names reports use.
FRAMEWORKS = (("fla", "FLA"), ("vllm", "vLLM"), ("inductor", "inductor"), ("sglang", "SGLang"),
              ("unsloth_zoo", "unsloth-zoo"), ("xformers", "xformers"),
              ("liger_kernel", "Liger-Kernel"), ("mamba_ssm", "mamba-ssm"),
              ("causal_conv1d", "causal-conv1d"))
#: Outcome -> check-like state for badges: runs on the GPU, degraded, broken, unknown.
FRAMEWORK_STATES = {
    "gpu": "pass", "triton": "pass", "cpu-only": "warn", "cpu-fallback": "fail",
    "fails-at-kernel": "fail", "triton-disabled": "fail", "no-triton": "fail",
    "gpu-unsupported": "fail", "unknown": "error", "fails-before-triton": "fail",
    "import-fails": "fail", "cpu": "fail", "triton-off": "warn",
}


@dataclass(frozen=True)
class FrameworkOutcome:
    """One installed framework on one node: its outcome, badge state and one-line detail."""

    key: str
    label: str
    outcome: str
    state: str
    detail: str


def framework_outcomes(facts: Mapping[str, Any]) -> list[FrameworkOutcome]:
    """The installed frameworks' outcomes from a node's facts (none for older probes)."""
    frameworks = facts.get("frameworks") if isinstance(facts, Mapping) else None
    if not isinstance(frameworks, Mapping):
        return []
    found = []
    for key, label in FRAMEWORKS:
        item = frameworks.get(key)
        if not isinstance(item, Mapping) or not item.get("installed"):
            continue
        outcome = str(item.get("outcome") or "unknown")
        found.append(FrameworkOutcome(key, label, outcome, FRAMEWORK_STATES.get(outcome, "error"),
                                      str(item.get("detail") or "")))
    return found


def frameworks_badge(facts: Mapping[str, Any], *, problems_only: bool = False) -> str:
    """'FLA cpu-fallback, vLLM fails-at-kernel, inductor fails-at-kernel' ('' when none).

    With `problems_only`, only the frameworks that will not run on the GPU (the gate's view).
    """
    return ", ".join(f"{item.label} {item.outcome}" for item in framework_outcomes(facts)
                     if not problems_only or item.state != "pass")
