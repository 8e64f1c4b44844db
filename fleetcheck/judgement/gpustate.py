"""The GPUs' state under a playbook: memory already held, foreign processes and memory health
graded from the probe's evidence, and the GPUs a job can use (those CUDA opens).

The probe cannot know the playbook, so its GPU-state checks carry their evidence and warn (or,
for memory repairs, fail) by default; `regrade` applies a playbook's `max_gpu_memory_used`,
`foreign_processes` and `memory_health` to them. `usable_gpus` is what `min_gpus` counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetcheck.probe.parts.catalogue import CAUSES_BY_ID
from fleetcheck.report.content import Check

#: `foreign_processes:` and `memory_health:` values.
FOREIGN_LEVELS = ("fail", "warn", "ignore")
HEALTH_LEVELS = ("fail", "warn")


@dataclass(frozen=True)
class GpuPolicy:
    """What a playbook says of the GPUs' state before a job."""

    #: The share of a GPU's memory that may be in use (by anything but the probe) before the
    #: node fails; None: no requirement (the probe warns above 5 %).
    max_memory_used: float | None = None
    #: Another process on a GPU: fail, warn (the probe's own grade) or ignore.
    foreign_processes: str = "warn"
    #: A pending or failed memory repair: fail (the probe's own grade) or warn.
    memory_health: str = "fail"


def _share(check: Check) -> float | None:
    value = check.evidence.get("worst_share") if isinstance(check.evidence, Mapping) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _with(check: Check, status: str, note: str) -> Check:
    return Check(check.id, status, f"{check.summary} ({note})", check.fix, check.evidence)


def graded_by(check_id: str) -> str | None:
    """The playbook key that grades a check (its record's `graded_by`), or None."""
    cause = CAUSES_BY_ID.get(check_id)
    return cause.graded_by if cause is not None else None


def regrade(check: Check, gpu: GpuPolicy, playbook: str) -> Check:
    """The check as this playbook grades it (other checks are returned as they are); a check
    already graded by it is returned unchanged."""
    if check.status not in ("pass", "warn", "fail"):
        return check
    key = graded_by(check.id)
    if key == "max_gpu_memory_used" and gpu.max_memory_used is not None:
        share = _share(check)
        if share is None:
            return check
        if share > gpu.max_memory_used and check.status != "fail":
            return _with(check, "fail", f"playbook {playbook} allows "
                                        f"{gpu.max_memory_used:.0%} in use")
        if share <= gpu.max_memory_used and check.status != "pass":
            return _with(check, "pass", f"within playbook {playbook}'s "
                                        f"{gpu.max_memory_used:.0%}")
        return check
    if key == "foreign_processes" and check.status != "pass":
        if gpu.foreign_processes == "ignore":
            return _with(check, "skip", f"playbook {playbook} ignores other processes")
        if gpu.foreign_processes != check.status:
            return Check(check.id, gpu.foreign_processes, check.summary, check.fix,
                         check.evidence)
        return check
    if key == "memory_health" and check.status == "fail" and gpu.memory_health == "warn":
        return _with(check, "warn", f"playbook {playbook} only warns on memory health")
    return check


def graded(checks: Iterable[Check], gpu: GpuPolicy, playbook: str) -> tuple[Check, ...]:
    """A node's checks with its GPU-state checks graded by the playbook: what the node's
    report and gate line show (their fix beside the status they gave the node)."""
    return tuple(regrade(check, gpu, playbook) for check in checks)


def usable_gpus(facts: Mapping[str, Any] | None) -> int | None:
    """The GPUs CUDA opens on this node, where the probe compared them with the driver's list
    (facts.gpu_state.cuda_count); None where it could not (older probes, CUDA not starting)."""
    state = facts.get("gpu_state") if isinstance(facts, Mapping) else None
    count = state.get("cuda_count") if isinstance(state, Mapping) else None
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return None
