"""Fleet consistency: mismatched versions across probed nodes, hostile facts left out."""

from __future__ import annotations

from typing import Any

from fleetcheck.judgement.consistency import fleet_checks
from fleetcheck.judgement.policy import DEFAULT_POLICY, Policy
from fleetcheck.playbook import load_playbook
from fleetcheck.report.content import Check, NodeResult, TritonVerdict


def facts(driver: str = "550.54.15", torch: str = "2.5.1", **extra: Any) -> dict[str, Any]:
    return {"driver": {"kernel_module": driver, "cuda_driver_version": "12.4"},
            "torch": {"version": torch, "cuda": "12.4"}, "triton": {"version": "3.1.0"},
            "python": {"version": "3.12.3"}, "gpu_count": 8,
            "gpus": [{"name": "NVIDIA H200"}] * 8, **extra}


def node(node_id: str, node_facts: Any, status: str = "ok") -> NodeResult:
    return NodeResult(node_id, node_id.split("/")[0], None, node_id, status, "", facts=node_facts)


def test_same_versions_everywhere_is_no_finding() -> None:
    nodes = [node("pve1", facts()), node("pve1/101", facts()), node("pve2", facts())]
    assert fleet_checks(nodes, load_playbook("pre-training")) == ()


def test_driver_mismatch_fails_under_pre_training_with_evidence() -> None:
    nodes = [node("pve1", facts()), node("pve1/101", facts()), node("pve2", facts("535.183.01"))]
    assert fleet_checks(nodes, load_playbook("pre-training")) == (
        Check(
            id="fleet_driver_mismatch",
            status="fail",
            summary="NVIDIA driver differs across the selection: "
                    "550.54.15 on 2 (pve1, pve1/101); 535.183.01 on 1 (pve2)",
            fix="install the same NVIDIA driver on every host of the selection "
                "(most nodes run 550.54.15)",
            evidence={"550.54.15": ["pve1", "pve1/101"], "535.183.01": ["pve2"]},
        ),
    )


def test_same_mismatch_only_warns_by_default_and_several_keys_are_separate() -> None:
    nodes = [node("a", facts()), node("b", facts("535.1", "2.4.0"))]
    found = fleet_checks(nodes, DEFAULT_POLICY)
    assert [(c.id, c.status) for c in found] == [
        ("fleet_driver_mismatch", "warn"), ("fleet_torch_mismatch", "warn")]
    assert found[1].summary == "torch version differs across the selection: " \
        "2.4.0 on 1 (b); 2.5.1 on 1 (a)"
    assert found[1].fix == "pin one torch version in every node's environment"


def test_long_lists_are_shortened_in_the_summary_but_complete_in_evidence() -> None:
    nodes = [node(f"n{i}", facts()) for i in range(5)] + [node("odd", facts(torch="2.6.0"))]
    (found,) = fleet_checks(nodes, Policy(consistent=("torch",)))
    assert found.summary == ("torch version differs across the selection: "
                             "2.5.1 on 5 (n0, n1, n2 and 2 more); 2.6.0 on 1 (odd)")
    assert found.evidence["2.5.1"] == ["n0", "n1", "n2", "n3", "n4"]


def test_only_probed_nodes_count() -> None:
    nodes = [node("a", facts()), node("b", facts("1.0"), status="unreachable"),
             node("c", facts("2.0"), status="skipped"), node("d", facts(), status="fail")]
    assert fleet_checks(nodes, Policy(consistent=("driver",))) == ()


def test_hostile_or_missing_facts_are_not_compared() -> None:
    hostile = [
        node("h1", {"driver": "550"}),
        node("h2", {"driver": {"kernel_module": ["550"]}}),
        node("h3", {"driver": {"kernel_module": True}}),
        node("h4", {"driver": {"kernel_module": "x" * 500}}),
        node("h5", {"driver": {"kernel_module": "550\x1b[31m"}}),
        node("h6", {"driver": {"kernel_module": ""}}),
        node("h7", "not a mapping"),
        node("h8", {}),
        node("h9", {"gpus": [{"name": "H200"}, "junk"]}),
    ]
    policy = Policy(consistent=("driver", "gpu_model", "torch"))
    assert fleet_checks([node("a", facts()), *hostile], policy) == ()


def test_gpu_model_and_count() -> None:
    small = facts(gpu_count=2, gpus=[{"name": "NVIDIA H200"}, {"name": "NVIDIA A100"}])
    found = fleet_checks([node("a", facts()), node("b", small)],
                         Policy(consistent_warn=("gpu_model", "gpu_count")))
    assert [(c.id, c.evidence) for c in found] == [
        ("fleet_gpu_model_mismatch",
         {"8x NVIDIA H200": ["a"], "1x NVIDIA A100, 1x NVIDIA H200": ["b"]}),
        ("fleet_gpu_count_mismatch", {"8": ["a"], "2": ["b"]}),
    ]


def verdict_node(node_id: str, node_facts: Any, verdict: str) -> NodeResult:
    return NodeResult(node_id, node_id.split("/")[0], None, node_id, "ok", "",
                      triton=TritonVerdict(verdict), facts=node_facts)


def test_nodes_without_a_gpu_stack_are_not_compared() -> None:
    # A Proxmox host probed with probe_host: no GPU, the distribution's Python, no torch.
    host = verdict_node("pve1", {"python": {"version": "3.11.2"}, "gpu_count": 0, "gpus": []},
                        "no-gpu")
    # A GPU node whose interpreter has no Triton: its GPU facts count, its Python does not.
    bare = verdict_node("pve1/104", facts("535.183.01", python={"version": "3.10.12"},
                                          torch={"version": "2.3.0", "cuda": "12.1"}),
                        "not-installed")
    jobs = [verdict_node(f"pve1/10{i}", facts(python={"version": "3.11.7"}), "gpu")
            for i in (1, 2, 3)]
    found = fleet_checks([host, *jobs, bare], load_playbook("pre-training"))
    assert [(c.id, c.status, c.evidence) for c in found] == [
        ("fleet_driver_mismatch", "fail",
         {"550.54.15": ["pve1/101", "pve1/102", "pve1/103"], "535.183.01": ["pve1/104"]})]


def test_gpu_count_leaves_out_a_node_without_gpu() -> None:
    host = verdict_node("pve1", {"gpu_count": 0}, "no-gpu")
    job = verdict_node("pve1/101", facts(), "gpu")
    assert fleet_checks([host, job], Policy(consistent=("gpu_count", "python"))) == ()


def test_an_amd_node_s_amdgpu_is_not_compared_with_nvidia_drivers() -> None:
    amd = facts("6.12.12", gpu_vendor="amd", gpus=[{"name": "AMD Instinct MI300X"}] * 8)
    amd["driver"]["cuda_driver_version"] = None
    amd["torch"]["cuda"] = None
    nodes = [node("pve1", facts()), node("pve2", facts()), node("pve3", amd)]
    found = fleet_checks(nodes, load_playbook("pre-training"))
    # The GPU model still differs (a job across both vendors); the driver is not NVIDIA's.
    assert [c.id for c in found] == ["fleet_gpu_model_mismatch"]
