"""Owns a policy (what a run requires, what only warns: a playbook loads into it) and a probed
node's status and one-line reason under it (`evaluate_node`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetcheck.checks import causal_rank
from fleetcheck.judgement.gpustate import GpuPolicy, regrade, usable_gpus
from fleetcheck.report.content import Check, TritonVerdict

#: Facts that fleet consistency can compare across nodes (see fleetcheck.judgement.consistency).
CONSISTENCY_KEYS = (
    "driver", "cuda_driver", "cuda", "torch", "triton", "python", "fla", "gpu_model", "gpu_count",
)

#: The check that runs a JIT kernel on every GPU; a deep policy requires it on a gpu verdict.
DEEP_CHECK = "triton_kernel"


@dataclass(frozen=True)
class Policy:
    """What a run requires (fails) and what only warns. Playbooks load into this."""

    name: str = "default"
    #: Check ids whose failure is only a warning under this policy.
    warn_only: frozenset[str] = frozenset()
    #: Check ids not evaluated at all.
    ignore: frozenset[str] = frozenset()
    #: Verdicts that fail the node (cpu-fallback always does; unknown is an error).
    failing_verdicts: frozenset[str] = frozenset({"cpu-fallback"})
    #: Fewest GPUs each node must have (0: no requirement).
    min_gpus: int = 0
    #: Run the probe with --deep (JIT kernel on every GPU).
    deep: bool = False
    #: Facts that must be equal across the selection (fleet consistency): a mismatch fails.
    consistent: tuple[str, ...] = ()
    #: Treat warnings as failures.
    strict_warnings: bool = False
    #: Facts that should be equal across the selection: a mismatch only warns.
    consistent_warn: tuple[str, ...] = ()
    #: One line saying what the playbook is for.
    description: str = ""
    #: Where the policy came from: a file path, "builtin:NAME", or "" for DEFAULT_POLICY.
    source: str = ""
    #: The GPUs' state before a job: memory in use, foreign processes, memory health.
    gpu: GpuPolicy = GpuPolicy()  # noqa: RUF009 (frozen: one shared default is safe)


#: What an audit applies when no playbook is given; fleetcheck/playbooks/default.yaml says
#: the same in YAML (a test keeps the two equal).
DEFAULT_POLICY = Policy(
    description="Report everything; version differences across nodes only warn.",
    consistent_warn=("driver", "cuda", "torch", "triton", "python", "fla"),
)


def effective_checks(checks: Iterable[Check], policy: Policy) -> list[Check]:
    """The checks as the policy sees them: ignored ones dropped, warn-only ones demoted."""
    result = []
    for check in checks:
        if check.id in policy.ignore:
            continue
        check = regrade(check, policy.gpu, policy.name)
        if check.status == "fail" and check.id in policy.warn_only:
            check = Check(check.id, "warn", check.summary, check.fix, check.evidence)
        elif check.status == "warn" and policy.strict_warnings:
            check = Check(check.id, "fail", check.summary, check.fix, check.evidence)
        result.append(check)
    return result


def _first(checks: list[Check], status: str) -> Check | None:
    hits = [check for check in checks if check.status == status]
    return min(hits, key=lambda check: causal_rank(check.id)) if hits else None


def _gpu_count(facts: Mapping[str, Any] | None) -> int | None:
    value = facts.get("gpu_count") if isinstance(facts, Mapping) else None
    # bool is an int in Python; a hostile node's `true` is not a GPU count.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def evaluate_node(
    checks: Iterable[Check], triton: TritonVerdict, policy: Policy = DEFAULT_POLICY,
    gpu_count: int | None = None, facts: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """(status, reason) for a probed node: fail, warn, error or ok, with the root cause first.

    `gpu_count` may be left out when `facts` (the probe's facts) are given: it is read from
    facts["gpu_count"]. A node whose GPU count is unknown cannot satisfy `min_gpus`: error.
    """
    seen = effective_checks(checks, policy)
    if gpu_count is None:
        gpu_count = _gpu_count(facts)
    # A GPU the driver lists that CUDA cannot open is missing for the job (min_gpus).
    usable = usable_gpus(facts)
    listed = gpu_count
    if usable is not None and gpu_count is not None and usable < gpu_count:
        gpu_count = usable
    if triton.verdict in policy.failing_verdicts:
        cause = next((c for c in seen if c.id == triton.cause and c.status != "pass"), None)
        if cause is None and triton.cause is None:
            # A verdict without a cause id (no-gpu): the first finding in causal order says why.
            cause = _first(seen, "fail") or _first(seen, "warn") or _first(seen, "error")
        text = cause.summary if cause else (triton.cause or "unknown cause")
        return "fail", f"Triton {triton.verdict}: {text}"
    failed = _first(seen, "fail")
    if failed is not None:
        return "fail", failed.summary
    if policy.min_gpus and gpu_count is not None and gpu_count < policy.min_gpus:
        opens = f" CUDA can open, of {listed} listed" if listed != gpu_count else ""
        return "fail", (f"{gpu_count} GPU(s){opens}, playbook {policy.name} requires "
                        f"{policy.min_gpus}")
    errored = _first(seen, "error")
    if triton.verdict == "unknown" or errored is not None:
        if errored is not None:
            return "error", errored.summary
        return "error", f"Triton verdict unknown: {triton.cause or 'probe incomplete'}"
    if policy.min_gpus and gpu_count is None:
        return "error", f"GPU count unknown, playbook {policy.name} requires {policy.min_gpus}"
    if policy.deep and triton.verdict == "gpu" and DEEP_CHECK not in policy.ignore:
        deep = next((c for c in seen if c.id == DEEP_CHECK), None)
        # A gpu verdict without the kernel run is only the shallow answer the playbook refused.
        if deep is None or deep.status == "skip":
            return "error", f"deep kernel check did not run (playbook {policy.name} requires it)"
    warned = _first(seen, "warn")
    if warned is not None:
        return "warn", warned.summary
    return "ok", f"Triton {triton.verdict}" + (f" ({triton.backend})" if triton.backend else "")
