"""Checks and Triton verdict of one node -> its status and one-line reason, under a policy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fleetcheck.checks import causal_rank
from fleetcheck.model import Check, TritonVerdict


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
    #: Facts that must be equal across the selection (fleet consistency).
    consistent: tuple[str, ...] = ()
    #: Treat warnings as failures.
    strict_warnings: bool = False
    extra: dict[str, object] = field(default_factory=dict)


DEFAULT_POLICY = Policy(consistent=("driver", "cuda", "torch", "triton", "python", "fla"))


def effective_checks(checks: Iterable[Check], policy: Policy) -> list[Check]:
    """The checks as the policy sees them: ignored ones dropped, warn-only ones demoted."""
    result = []
    for check in checks:
        if check.id in policy.ignore:
            continue
        if check.status == "fail" and check.id in policy.warn_only:
            check = Check(check.id, "warn", check.summary, check.fix, check.evidence)
        elif check.status == "warn" and policy.strict_warnings:
            check = Check(check.id, "fail", check.summary, check.fix, check.evidence)
        result.append(check)
    return result


def _first(checks: list[Check], status: str) -> Check | None:
    hits = [check for check in checks if check.status == status]
    return min(hits, key=lambda check: causal_rank(check.id)) if hits else None


def evaluate_node(
    checks: Iterable[Check], triton: TritonVerdict, policy: Policy = DEFAULT_POLICY,
    gpu_count: int | None = None,
) -> tuple[str, str]:
    """(status, reason) for a probed node: fail, warn or ok, with the root cause first."""
    seen = effective_checks(checks, policy)
    if triton.verdict in policy.failing_verdicts:
        cause = next((c for c in seen if c.id == triton.cause and c.status != "pass"), None)
        text = cause.summary if cause else (triton.cause or "unknown cause")
        return "fail", f"Triton {triton.verdict}: {text}"
    failed = _first(seen, "fail")
    if failed is not None:
        return "fail", failed.summary
    if policy.min_gpus and (gpu_count or 0) < policy.min_gpus:
        return "fail", f"{gpu_count or 0} GPU(s), playbook {policy.name} requires {policy.min_gpus}"
    errored = _first(seen, "error")
    if triton.verdict == "unknown" or errored is not None:
        if errored is not None:
            return "error", errored.summary
        return "error", f"Triton verdict unknown: {triton.cause or 'probe incomplete'}"
    warned = _first(seen, "warn")
    if warned is not None:
        return "warn", warned.summary
    return "ok", f"Triton {triton.verdict}" + (f" ({triton.backend})" if triton.backend else "")
