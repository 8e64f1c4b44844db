"""The node verdict under the built-in playbooks: what fails, what errs, what only warns; and
the exit-code contract."""

from __future__ import annotations

import pytest

from fleetcheck.model import Check, NodeResult, Report, TritonVerdict
from fleetcheck.playbook import load_playbook
from fleetcheck.verdict import DEFAULT_POLICY, evaluate_node, exit_code_for

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


def node(node_id: str, status: str) -> NodeResult:
    host, _, vmid = node_id.partition("/")
    return NodeResult(id=node_id, host=host, vmid=int(vmid) if vmid else None, name=node_id,
                      status=status, reason=status)


def report(*statuses: str, interrupted: bool = False) -> Report:
    nodes = tuple(node(f"pve1/{100 + i}", s) for i, s in enumerate(statuses))
    return Report("2026-12-01T00:00:00Z", "2026-12-01T00:00:05Z", nodes, interrupted=interrupted)


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ((), 3),
        (("skipped", "skipped"), 3),
        (("ok", "warn", "skipped"), 0),
        (("ok", "fail"), 1),
        (("fail", "unreachable", "error"), 1),
        (("ok", "unreachable"), 3),
        (("warn", "error"), 3),
    ],
)
def test_exit_codes_follow_the_design(statuses: tuple[str, ...], code: int) -> None:
    assert exit_code_for(report(*statuses)) == code


def test_interrupted_audit_is_unverified_unless_something_failed() -> None:
    assert exit_code_for(report("ok", interrupted=True)) == 3
    assert exit_code_for(report("fail", interrupted=True)) == 1


def test_failing_fleet_check_fails_the_audit() -> None:
    base = report("ok", "ok")
    failing = Report(base.started_at, base.finished_at, base.nodes,
                     fleet_checks=(Check("fleet_driver_mismatch", "fail", "drivers differ"),))
    assert exit_code_for(failing) == 1


#: A node of an older probe: its verdict names a cause, with no fix text of its own.
FACTS = {"python": {"executable": "/opt/venv/bin/python", "version": "3.12.3"},
         "os": {"id": "rocky"}, "triton": {"version": "3.6.0"}}


def test_a_failing_verdict_without_a_fix_gets_its_causes_record() -> None:
    from fleetcheck.verdict import blocking_fix, node_fix
    failing = NodeResult(id="n", host="n", vmid=None, name="n", status="fail",
                         reason="Triton cpu-fallback",
                         triton=TritonVerdict("cpu-fallback", None, "libc_crt_missing", ""),
                         checks=(Check("triton_target", "fail", "crti.o", ""),), facts=FACTS)
    fix = "libc's startup files (crti.o, crt1.o) missing: dnf install -y glibc-devel"
    assert node_fix(failing) == fix
    assert blocking_fix(failing) == fix


def test_a_failing_check_without_a_fix_gets_its_record_filled_for_the_node() -> None:
    from fleetcheck.verdict import blocking_fix, node_fix
    failing = NodeResult(id="n", host="n", vmid=None, name="n", status="fail", reason="x",
                         triton=TritonVerdict("gpu", "cuda"),
                         checks=(Check("inductor_ready", "pass", "ok", ""),
                                 Check("triton_install_broken", "fail", "files gone", "")),
                         facts=FACTS)
    expected = ("/opt/venv/bin/python -m pip install --force-reinstall --no-deps "
                "triton==3.6.0")
    assert expected in node_fix(failing)
    assert expected in blocking_fix(failing)
