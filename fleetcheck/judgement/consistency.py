"""Fleet consistency: versions that differ across the nodes of one selection, as findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleetcheck.judgement.policy import Policy
from fleetcheck.judgement.statuses import PROBED_STATUSES
from fleetcheck.report.content import Check, NodeResult

#: Statuses of nodes whose facts came from a probe (skipped and unreachable ones have none).

#: Keys that describe the workload's GPU stack. A node whose Triton verdict says it has no GPU
#: or no Triton (a Proxmox host probed with `probe_host`, a CPU-only node) runs no GPU job, so
#: its Python or torch is not the fleet's: comparing it would fail a gate on a bystander.
WORKLOAD_KEYS = frozenset({"torch", "python", "triton", "fla", "cuda"})
#: Verdicts of nodes left out of the workload comparisons.
NO_WORKLOAD_VERDICTS = frozenset({"no-gpu", "not-installed"})

#: Longest fact value compared; a longer one is a hostile or broken node's, not a version.
_MAX_VALUE = 200


def _clean(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = value.strip()
        if text and len(text) <= _MAX_VALUE and text.isprintable():
            return text
    return None


def _nested(*path: str) -> Callable[[Mapping[str, Any]], str | None]:
    def read(facts: Mapping[str, Any]) -> str | None:
        value: object = facts
        for key in path:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        return _clean(value)

    return read


def _gpu_model(facts: Mapping[str, Any]) -> str | None:
    gpus = facts.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        return None
    names = [_clean(gpu.get("name")) if isinstance(gpu, Mapping) else None for gpu in gpus]
    if any(name is None for name in names):
        return None
    counts = Counter(names)
    return ", ".join(f"{count}x {name}" for name, count in sorted(counts.items(), key=str))


#: How each consistency key reads its value from a node's facts, with a label and a fix.
_FACTS: dict[str, tuple[Callable[[Mapping[str, Any]], str | None], str, str]] = {
    "driver": (_nested("driver", "kernel_module"), "NVIDIA driver",
               "install the same NVIDIA driver on every host of the selection"),
    "cuda_driver": (_nested("driver", "cuda_driver_version"), "driver CUDA version",
                    "install the same NVIDIA driver on every host of the selection"),
    "cuda": (_nested("torch", "cuda"), "torch CUDA build",
             "install the same torch build (same +cuXXX wheel) on every node"),
    "torch": (_nested("torch", "version"), "torch version",
              "pin one torch version in every node's environment"),
    "triton": (_nested("triton", "version"), "Triton version",
               "pin one triton version in every node's environment"),
    "python": (_nested("python", "version"), "Python version",
               "run the job with the same Python version on every node"),
    "fla": (_nested("fla", "version"), "flash-linear-attention version",
            "pin one flash-linear-attention version in every node's environment"),
    "gpu_model": (_gpu_model, "GPU model", "select nodes with the same GPUs (--limit)"),
    "gpu_count": (_nested("gpu_count"), "GPU count",
                  "select nodes with the same number of GPUs (--limit)"),
}


#: Keys that are NVIDIA's driver stack: an AMD node (facts.gpu_vendor "amd") is left out.
NVIDIA_KEYS = frozenset({"driver", "cuda_driver", "cuda"})


def fact_value(facts: Mapping[str, Any], key: str) -> str | None:
    """A node's value for a consistency key, or None when missing or not a plain value."""
    if not isinstance(facts, Mapping) or key not in _FACTS:
        return None
    return _FACTS[key][0](facts)


def fact_label(key: str) -> str:
    """What a consistency key names, for people: "torch version"."""
    return _FACTS[key][1] if key in _FACTS else key


def compared(node: NodeResult, key: str) -> bool:
    """Whether a probed node takes part in the comparison of this key.

    A node without a GPU has no GPU facts to compare; the workload's stack (torch, Python,
    Triton, FLA, torch's CUDA) is compared only across nodes that can run a GPU job.
    """
    if node.triton.verdict == "no-gpu":
        return False
    if key in NVIDIA_KEYS and isinstance(node.facts, Mapping) and node.facts.get(
            "gpu_vendor") == "amd":
        return False  # an AMD node's driver is amdgpu, not one of NVIDIA's versions
    return not (key in WORKLOAD_KEYS and node.triton.verdict in NO_WORKLOAD_VERDICTS)


def _mismatch(key: str, nodes: Sequence[NodeResult], status: str) -> Check | None:
    by_value: dict[str, list[str]] = {}
    for node in nodes:
        if not compared(node, key):
            continue
        value = fact_value(node.facts, key)
        if value is not None:
            by_value.setdefault(value, []).append(node.id)
    if len(by_value) < 2:
        return None
    # Most nodes first, so the summary leads with what the fleet mostly runs.
    ordered = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
    label, fix = _FACTS[key][1], _FACTS[key][2]
    parts = []
    for value, ids in ordered:
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        parts.append(f"{value} on {len(ids)} ({shown})")
    majority = ordered[0][0] if len(ordered[0][1]) > len(ordered[1][1]) else None
    return Check(
        id=f"fleet_{key}_mismatch",
        status=status,
        summary=f"{label} differs across the selection: " + "; ".join(parts),
        fix=fix + (f" (most nodes run {majority})" if majority else ""),
        evidence={value: sorted(ids) for value, ids in ordered},
    )


def fleet_checks(nodes: Sequence[NodeResult], policy: Policy) -> tuple[Check, ...]:
    """Version mismatches across the probed nodes: fail or warn as the policy says.

    Only nodes that were probed count, and only facts that are present and plain (a string
    or an integer) on a node are compared; a missing or odd fact is left out, not a mismatch.
    Nodes without a GPU, or without Triton, are left out as `compared` says.
    """
    probed = [node for node in nodes if node.status in PROBED_STATUSES]
    levels = [(key, "fail") for key in policy.consistent]
    levels += [(key, "warn") for key in policy.consistent_warn if key not in policy.consistent]
    findings = []
    for key, status in levels:
        if key not in _FACTS:
            continue
        finding = _mismatch(key, probed, status)
        if finding is not None:
            findings.append(finding)
    return tuple(findings)
