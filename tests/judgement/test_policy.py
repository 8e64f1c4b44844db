"""A node's status under the built-in playbooks: what fails, what errs, what only warns."""

from __future__ import annotations

from fleetcheck.judgement.policy import DEFAULT_POLICY, evaluate_node
from fleetcheck.playbook import load_playbook
from fleetcheck.report.content import Check, TritonVerdict

GPU = TritonVerdict("gpu", "cuda")
KERNEL_OK = Check("triton_kernel", "pass", "JIT kernel ran on 8 GPU(s)")
FLA_HIDDEN = Check("fla_fallback_hidden", "fail", "FLA falls back to CPU", "upgrade FLA")


def test_default_passes_a_gpu_node_without_the_deep_check() -> None:
    assert evaluate_node([], GPU, DEFAULT_POLICY, facts={"gpu_count": 1}) == (
        "ok", "Triton gpu (cuda)")


def test_pre_training_needs_the_kernel_run_on_a_gpu_node() -> None:
    policy = load_playbook("pre-training")
    assert evaluate_node([], GPU, policy, facts={"gpu_count": 8}) == (
        "error", "deep kernel check did not run (playbook pre-training requires it)")
    assert evaluate_node([KERNEL_OK], GPU, policy, facts={"gpu_count": 8}) == (
        "ok", "Triton gpu (cuda)")


def test_pre_training_fails_a_node_without_gpus() -> None:
    verdict = TritonVerdict("no-gpu", None, "gpu_present", "attach a GPU")
    checks = [Check("gpu_present", "skip", "no NVIDIA GPU")]
    assert evaluate_node(checks, verdict, load_playbook("pre-training"), facts={}) == (
        "fail", "Triton no-gpu: no NVIDIA GPU")
    assert evaluate_node(checks, verdict, DEFAULT_POLICY, facts={}) == ("ok", "Triton no-gpu")


def test_min_gpus_from_facts_and_unknown_count(tmp_path) -> None:
    path = tmp_path / "eight.yaml"
    path.write_text("min_gpus: 8\n", encoding="utf-8")
    policy = load_playbook(str(path))
    assert evaluate_node([], GPU, policy, facts={"gpu_count": 4}) == (
        "fail", "4 GPU(s), playbook eight requires 8")
    assert evaluate_node([], GPU, policy, facts={"gpu_count": True}) == (
        "error", "GPU count unknown, playbook eight requires 8")
    assert evaluate_node([], GPU, policy, gpu_count=8) == ("ok", "Triton gpu (cuda)")


def test_warn_only_and_ignore(tmp_path) -> None:
    path = tmp_path / "lenient.yaml"
    path.write_text("checks:\n  warn_only: [fla_fallback_hidden]\n", encoding="utf-8")
    assert evaluate_node([FLA_HIDDEN], GPU, load_playbook(str(path))) == (
        "warn", "FLA falls back to CPU")
    path.write_text("checks:\n  ignore: [fla_fallback_hidden]\n", encoding="utf-8")
    assert evaluate_node([FLA_HIDDEN], GPU, load_playbook(str(path))) == (
        "ok", "Triton gpu (cuda)")
    assert evaluate_node([FLA_HIDDEN], GPU, DEFAULT_POLICY) == ("fail", "FLA falls back to CPU")


def test_a_failing_verdict_without_a_cause_id_names_the_first_finding() -> None:
    checks = [Check("torch_cuda", "warn", "torch not installed"),
              Check("gpu_present", "warn", "no NVIDIA GPU on this node")]
    assert evaluate_node(checks, TritonVerdict("no-gpu"), load_playbook("quick")) == (
        "fail", "Triton no-gpu: no NVIDIA GPU on this node")
    assert evaluate_node([], TritonVerdict("no-gpu"), load_playbook("quick")) == (
        "fail", "Triton no-gpu: unknown cause")
