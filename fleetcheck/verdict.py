"""Judgement: a node's status and one-line reason under a policy, the status sets and exit codes.

Owns what a status means (which count as failing, unverified, healthy, probed), a node's root
cause and fix (`root_cause`, `node_fix` for reports, `blocking_fix` for the gate) and the exit
codes of `audit`, `report`, `probe` and `gate`; the status vocabulary itself is the data
contract in `model.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetcheck import failures
from fleetcheck.checks import causal_rank, cause_fix
from fleetcheck.gpustate import GpuPolicy, regrade, usable_gpus
from fleetcheck.model import Check, NodeResult, TritonVerdict

if TYPE_CHECKING:
    from fleetcheck.model import Report

#: Exit codes (the README's table): passed; a node failed; bad input or usage; unverified.
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_UNVERIFIED = 3

#: Node statuses that mean "could not be verified" (exit code 3 when nothing failed).
UNVERIFIED_STATUSES = frozenset({"error", "unreachable"})
#: For a gate, a node it could not look at is not a pass: skipped (stopped) ones included.
GATE_UNVERIFIED = UNVERIFIED_STATUSES | {"skipped"}
#: Statuses that need someone's attention (history's "failing since", the failing-only views).
FAILING_STATUSES = frozenset({"fail"}) | UNVERIFIED_STATUSES
#: Statuses of a node that was verified and may run jobs.
HEALTHY_STATUSES = frozenset({"ok", "warn"})
#: Statuses a node can have once the probe printed its document (what fleet rules compare).
PROBED_STATUSES = HEALTHY_STATUSES | {"fail", "error"}
#: The statuses the probe itself may report (its document's `status`).
PROBE_STATUSES = ("ok", "warn", "fail", "error")
#: Node statuses that need a look, most urgent first (the list below the matrix).
PROBLEM_STATUSES = ("fail", "error", "unreachable", "warn")
#: Check statuses that are a problem, worst first: a root cause is a check of the worst one
#: found, a matrix cell in one of them names its check.
PROBLEM_CHECK_STATUSES = ("fail", "error", "warn")

#: Facts that fleet consistency can compare across nodes (see fleetcheck.consistency).
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


def exit_code_for(report: Report) -> int:
    """The documented exit code: 0 passed, 1 a node failed, 3 some nodes (or all) unverified."""
    statuses = {node.status for node in report.nodes}
    failed = "fail" in statuses or any(c.status == "fail" for c in report.fleet_checks)
    if failed:
        return EXIT_FAIL
    if statuses & UNVERIFIED_STATUSES or report.interrupted:
        return EXIT_UNVERIFIED
    if not statuses & HEALTHY_STATUSES:
        # Nothing was verified (no node, or every one skipped): not a pass.
        return EXIT_UNVERIFIED
    return EXIT_PASS


def gate_exit_code(report: Report) -> int:
    """0 every selected node verified and passing; 1 something failed; 3 some not verified.

    An empty selection verifies nothing, so it cannot pass: 3.
    """
    statuses = {node.status for node in report.nodes}
    if "fail" in statuses or any(check.status == "fail" for check in report.fleet_checks):
        return EXIT_FAIL
    if statuses & GATE_UNVERIFIED or report.interrupted or not report.nodes:
        return EXIT_UNVERIFIED
    return EXIT_PASS


def root_cause(node: NodeResult) -> Check | None:
    """The check that explains the node's status: Triton's cause, else the first non-pass one."""
    if node.triton.cause:
        match = node.check(node.triton.cause)
        if match is not None and match.status != "pass":
            return match
    for status in PROBLEM_CHECK_STATUSES:
        hits = [c for c in node.checks if c.status == status]
        if hits:
            return min(hits, key=lambda c: causal_rank(c.id))
    return None


def node_fix(node: NodeResult) -> str:
    """The fix shown beside a node in the matrix, the HTML report and the terminal.

    A check or a verdict without a fix of its own (a report of an older probe) gets its
    cause's record, filled with the node's facts: a failing node always says what to change.
    """
    cause = root_cause(node)
    if node.triton.verdict == "cpu-fallback":
        return node.triton.fix or cause_fix(node.triton.cause, node.facts) or (
            cause_fix(cause.id, node.facts) if cause is not None else "")
    return _check_fix(cause, node.facts) if cause is not None else ""


def _check_fix(check: Check, facts: object) -> str:
    """A check's own fix; for a failing check without one, its cause's record's."""
    return check.fix or (cause_fix(check.id, facts) if check.status == "fail" else "")


_UNVERIFIED_FIX = {
    "unreachable": "check that the node is up and reachable over SSH, then run the gate again",
    "skipped": "start the container, or leave it out of the selection (--limit)",
    "error": "run `fleetcheck audit` on this node for the probe's error output",
}

#: A probe that ran out of time: the node is slow (import torch, --deep), or hangs.
_TIMEOUT_FIX = ("raise `timeout` for this host or container in the inventory (--deep needs "
                "more), or look for what hangs: `fleetcheck probe` on the node itself")

#: An unreachable node's fix when SSH refused a host key, by the failure's id.
_HOST_KEY_FIXES = {
    failures.HOST_KEY_UNKNOWN:
        "check the host's key fingerprint out of band (ssh-keyscan -p PORT HOST | ssh-keygen "
        "-lf -, against ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then "
        "add the key to known_hosts, or set ssh.host_key_policy: accept-new",
    failures.HOST_KEY_CHANGED:
        "find out why the host key changed (reinstalled host, or another machine on its "
        "address) before removing the old key with ssh-keygen -R HOST",
    failures.JUMP_HOST_KEY:
        "check the jump host's key fingerprint out of band (ssh-keyscan), then add it to "
        "known_hosts; if a key for it is already there and changed, find out why before "
        "ssh-keygen -R HOST",
}

#: An error node's fix when a tool refused before the probe ran, by the refusal's id.
_REFUSAL_FIXES = {
    failures.GATEKEEPER_REFUSED:
        "the host's audit key runs only what its fleetcheck gatekeeper allows: after an "
        "upgrade, run `fleetcheck host-setup --key KEY.pub | ssh root@HOST python3 -` again "
        "to add this probe's hash (`fleetcheck probe --script --sha256`)",
    failures.AGENT_NOT_CONFIGURED:
        "enable the VM's guest agent (`qm set VMID --agent 1`) and install qemu-guest-agent "
        "in the guest",
    failures.AGENT_NOT_ANSWERING:
        "start qemu-guest-agent in the guest (systemctl enable --now qemu-guest-agent)",
    failures.SUDO_PASSWORD:
        "allow the login to run the tool with `sudo -n` (a NOPASSWD sudoers rule)",
}

def failure_id(node: NodeResult) -> str | None:
    """The id of a node's failure outside the probe (`fleetcheck/failures.py`), set where it
    happened (a report saved before ids gets it when read: `reportio.node_from_dict`)."""
    return node.triton.cause if node.triton.cause in failures.FAILURE_IDS else None


def blocking_fix(node: NodeResult) -> str:
    """What to do about a node that blocks a gate: the gate line's and gate JSON's fix."""
    failure = failure_id(node)
    if node.status == "unreachable" and failure in _HOST_KEY_FIXES:
        return _HOST_KEY_FIXES[failure]
    if node.status in ("unreachable", "skipped"):
        return _UNVERIFIED_FIX[node.status]
    if node.status == "error" and failure == failures.TIMED_OUT:
        return _TIMEOUT_FIX
    if node.status == "error" and failure in _REFUSAL_FIXES:
        return _REFUSAL_FIXES[failure]
    # A failing verdict is the root cause the reason names; its fix comes first.
    if node.triton.verdict not in ("gpu", "unknown") and node.triton.fix:
        return node.triton.fix
    recorded = cause_fix(node.triton.cause, node.facts)
    if node.triton.verdict == "cpu-fallback" and recorded:
        return recorded
    hits = sorted((c for c in node.checks if c.status == node.status),
                  key=lambda c: causal_rank(c.id))
    for hit in hits:
        fix = _check_fix(hit, node.facts)
        if fix:
            return fix
    return node.triton.fix or _UNVERIFIED_FIX.get(node.status, "")


# What each framework will do (facts.frameworks of the probe) -------------------------------

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
