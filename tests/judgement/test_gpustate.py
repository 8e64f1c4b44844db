"""The GPU-state checks under a playbook: graded from their evidence, once; min_gpus counts the
GPUs CUDA opens."""

from __future__ import annotations

import pytest

from fleetcheck.judgement.gpustate import GpuPolicy, graded, regrade, usable_gpus
from fleetcheck.judgement.policy import Policy, evaluate_node
from fleetcheck.report.content import Check, TritonVerdict

HELD = Check("gpu_memory_in_use", "warn", "GPU 0: 128.0 GiB of 140.4 GiB in use (91%)",
             "stop what holds it", {"worst_share": 0.912, "max_share": 0.05})
FOREIGN = Check("gpu_foreign_processes", "warn", "1 foreign process on the GPUs: GPU 0: pid 7",
                "stop what holds it", {})
REPAIR = Check("gpu_memory_health", "fail", "GPU 1: memory repair pending", "reset the GPU", {})
GPU = TritonVerdict("gpu", "cuda")


@pytest.mark.parametrize(
    ("check", "policy", "status", "note"),
    [
        (HELD, GpuPolicy(max_memory_used=0.05), "fail", " (playbook p allows 5% in use)"),
        (HELD, GpuPolicy(max_memory_used=0.95), "pass", " (within playbook p's 95%)"),
        (HELD, GpuPolicy(), "warn", ""),
        (FOREIGN, GpuPolicy(foreign_processes="fail"), "fail", ""),
        (FOREIGN, GpuPolicy(foreign_processes="ignore"), "skip",
         " (playbook p ignores other processes)"),
        (FOREIGN, GpuPolicy(), "warn", ""),
        (REPAIR, GpuPolicy(memory_health="warn"), "warn",
         " (playbook p only warns on memory health)"),
        (REPAIR, GpuPolicy(), "fail", ""),
    ],
)
def test_regrade_by_the_playbook_once(check: Check, policy: GpuPolicy, status: str,
                                      note: str) -> None:
    once = regrade(check, policy, "p")
    assert (once.status, once.summary) == (status, check.summary + note)
    assert regrade(once, policy, "p") == once
    assert graded((check, once), policy, "p") == (once, once)


def test_a_playbook_fails_held_memory_and_names_it() -> None:
    strict = Policy(name="pre-training", gpu=GpuPolicy(0.05, "fail", "fail"))
    assert evaluate_node((HELD, FOREIGN), GPU, strict) == (
        "fail", HELD.summary + " (playbook pre-training allows 5% in use)")
    assert evaluate_node((HELD, FOREIGN), GPU, Policy()) == ("warn", HELD.summary)


def test_min_gpus_counts_the_gpus_cuda_opens() -> None:
    facts = {"gpu_count": 8, "gpu_state": {"listed": 8, "cuda_count": 7}}
    assert usable_gpus(facts) == 7
    assert evaluate_node((), GPU, Policy(name="job", min_gpus=8), facts=facts) == (
        "fail", "7 GPU(s) CUDA can open, of 8 listed, playbook job requires 8")
    assert evaluate_node((), GPU, Policy(name="job", min_gpus=7), facts=facts)[0] == "ok"
    # A node probed before the GPU state: its count is the driver's.
    assert usable_gpus({"gpu_count": 8}) is None
    assert evaluate_node((), GPU, Policy(min_gpus=8), facts={"gpu_count": 8})[0] == "ok"
