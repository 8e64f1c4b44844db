"""AMD nodes: the probe's verdict and cause for Triton's HIP backend on fake ROCm nodes.

The nodes are tests/nodeenv.py's `make_amd_node`: KFD topology under /sys, /dev/kfd and
/dev/dri/renderD*, a stub libamdhip64 compiled here with the entry points Triton's driver.c and
torch call, a stub ROCm torch (torch.version.hip) and the stub Triton whose HIP driver searches
for libamdhip64 as third_party/amd/backend/driver.py does. No row here was seen on real AMD
hardware (docs/checks.md, "AMD GPUs").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.checks import vendor_checks
from fleetcheck.probe.results import parse_probe_output
from tests.nodeenv import make_amd_node, make_node, run_probe

pytestmark = pytest.mark.timeout(120)

#: name -> (make_amd_node keywords, verdict, cause, node status, exit code, check statuses).
CASES: dict[str, tuple[dict[str, Any], str, str | None, str, int, dict[str, str]]] = {
    "healthy": ({}, "gpu", None, "ok", 0,
                {"gpu_present": "pass", "dev_nodes_missing": "pass", "triton_target": "pass",
                 "libamdhip64_not_found": "pass", "libamdhip64_other_rocm": "pass"}),
    "no_dev_nodes_lxc": ({"mode": "no-dev-nodes", "container": "lxc"}, "cpu-fallback",
                         "dev_nodes_missing", "fail", 1,
                         {"gpu_present": "pass", "dev_nodes_missing": "fail",
                          "zero_active_drivers": "fail"}),
    "insufficient_driver": ({"mode": "insufficient-driver"}, "cpu-fallback",
                            "driver_userspace_mismatch", "fail", 1,
                            {"driver_userspace_mismatch": "fail", "zero_active_drivers": "skip"}),
    "no_device": ({"mode": "no-device"}, "cpu-fallback", "zero_active_drivers", "fail", 1,
                  {"dev_nodes_missing": "pass", "zero_active_drivers": "fail"}),
    "cpu_torch": ({"mode": "cpu-torch"}, "cpu-fallback", "torch_cuda", "fail", 1,
                  {"torch_cuda": "fail"}),
    "torch_lacks_gfx": ({"gfx_target_version": 110500, "gpu_name": "AMD Radeon 890M"},
                        "cpu-fallback", "torch_lacks_arch", "fail", 1,
                        {"torch_lacks_arch": "fail", "gpu_arch_unsupported": "pass"}),
    "hsa_override": ({"gfx_target_version": 100302, "gpu_name": "AMD Radeon RX 6700 XT",
                      "env": {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}}, "gpu", None, "warn", 0,
                     {"torch_lacks_arch": "warn", "gpu_arch_unsupported": "warn",
                      "triton_target": "pass"}),
    "no_compiler": ({"compiler": False}, "cpu-fallback", "no_c_compiler", "fail", 1,
                    {"no_c_compiler": "fail", "triton_target": "fail"}),
    "libhip_path_invalid": ({"mode": "libhip-path"}, "cpu-fallback", "libhip_path_invalid",
                            "fail", 1, {"libhip_path_invalid": "fail",
                                        "libamdhip64_not_found": "skip"}),
    "libamdhip64_not_found": ({"mode": "no-libhip"}, "cpu-fallback", "libamdhip64_not_found",
                              "fail", 1, {"libamdhip64_not_found": "fail",
                                          "zero_active_drivers": "skip"}),
    "libamdhip64_other_rocm": ({"mode": "system-rocm"}, "cpu-fallback",
                               "libamdhip64_other_rocm", "fail", 1,
                               {"libamdhip64_other_rocm": "fail", "triton_target": "pass"}),
}


def probe(tmp_path: Path, **kwargs: Any) -> tuple[int, dict[str, Any], dict[str, Any]]:
    node = make_amd_node(tmp_path / "node", **kwargs)
    rc, doc, stderr = run_probe(node)
    assert stderr == ""
    return rc, doc, {check["id"]: check for check in doc["checks"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_amd_row(tmp_path: Path, name: str) -> None:
    kwargs, verdict, cause, status, code, statuses = CASES[name]
    rc, doc, by_id = probe(tmp_path, **kwargs)
    triton = doc["triton"]
    assert (triton["verdict"], triton["cause"], doc["status"], rc) == (
        verdict, cause, status, code), doc["reason"]
    assert {cid: by_id[cid]["status"] for cid in statuses} == statuses
    # An AMD node's document: the shared checks and the HIP ones, none of NVIDIA's own.
    assert [check["id"] for check in doc["checks"]] == [i.id for i in vendor_checks("amd")]
    assert doc["facts"]["gpu_vendor"] == "amd"
    assert triton["backend"] == ("hip" if verdict == "gpu" else None)
    parse_probe_output(json.dumps(doc).encode())


def test_healthy_facts_name_the_gpu_its_gfx_and_the_hip_runtime(tmp_path: Path) -> None:
    _, doc, by_id = probe(tmp_path, gpus=2)
    facts = doc["facts"]
    assert [(g["name"], g["gfx"]) for g in facts["gpus"]] == [("AMD Instinct MI300X",
                                                               "gfx942")] * 2
    assert facts["driver"] == {"kernel_module": "6.12.12", "userspace": "6.4.43482",
                               "cuda_driver_version": None}
    assert facts["torch"]["hip"] == "6.4.43482-0f2d60242"
    assert facts["amd"]["libamdhip64_found_by"] == "mapped by torch"
    assert [g["render_minor"] for g in facts["amd"]["kfd_gpus"]] == [128, 129]
    assert by_id["gpu_present"]["summary"] == "2× AMD Instinct MI300X (gfx942)"
    assert by_id["dev_nodes_missing"]["summary"] == "3 device nodes open read-write"
    assert by_id["triton_target"]["summary"] == (
        "get_current_target() = hip:gfx942, built from nothing (no entry of it in the workload's "
        "cache)")


def test_lxc_without_dev_nodes_says_what_to_pass_through(tmp_path: Path) -> None:
    _, _, by_id = probe(tmp_path, mode="no-dev-nodes", container="lxc")
    check = by_id["dev_nodes_missing"]
    assert check["summary"] == ("no /dev/kfd or render nodes, though KFD lists 1 GPU(s) (not "
                                "passed into the lxc container)")
    assert "lxc.mount.entry: /dev/kfd dev/kfd none bind,optional,create=file" in check["fix"]
    assert "lxc.cgroup2.devices.allow: c 510:* rwm and c 226:* rwm" in check["fix"]
    assert check["evidence"]["open"] == {"kfd": "ENOENT", "dri/renderD128": "ENOENT"}


def test_the_probe_replays_triton_s_hip_search_with_its_exact_errors(tmp_path: Path) -> None:
    """The probe's replay of _get_path_to_hip_runtime_dylib() and the stub Triton's copy of it
    (from driver.py) fail with the same text; the first kernel's error is classified to it."""
    for mode, row in (("no-libhip", "libamdhip64_not_found"),
                      ("libhip-path", "libhip_path_invalid")):
        _, _, by_id = probe(tmp_path / mode, mode=mode)
        expected = by_id[row]["evidence"]["expected_error"]
        target = by_id["triton_target"]["evidence"]
        assert target["error"] == expected
        assert target["matches"] == row
    assert expected.startswith("RuntimeError: TRITON_LIBHIP_PATH '")
    assert expected.endswith("rocm/lib/libamdhip64.so' does not point to a valid "
                             "libamdhip64.so")


def test_other_rocm_names_both_versions_and_torch_s_library(tmp_path: Path) -> None:
    _, doc, by_id = probe(tmp_path, mode="system-rocm")
    check = by_id["libamdhip64_other_rocm"]
    assert "(HIP 6.2.41133, found by TRITON_LIBHIP_PATH), torch is built for ROCm 6.4" in (
        check["summary"])
    assert check["fix"].startswith("make Triton use torch's HIP runtime: unset "
                                   "TRITON_LIBHIP_PATH or set it to ")
    assert doc["facts"]["driver"]["userspace"] == "6.2.41133"


def test_frameworks_on_rocm(tmp_path: Path) -> None:
    _, doc, _ = probe(tmp_path, fla="0.6.0", vllm="0.33.0")
    frameworks = doc["facts"]["frameworks"]
    assert frameworks["fla"]["outcome"] == "gpu"
    assert frameworks["fla"]["detail"] == "FLA 0.6.0 runs on the GPU (device_platform=hip)"
    # No amdsmi for the workload: vLLM's rocm_platform_plugin() finds no ROCm platform.
    assert frameworks["vllm"]["outcome"] == "import-fails"
    assert "ROCm platform is not available because: No module named 'amdsmi'" in (
        frameworks["vllm"]["detail"])
    assert frameworks["inductor"]["outcome"] == "triton"
    assert "(HIP backend)" in frameworks["inductor"]["detail"]


def test_vllm_with_amdsmi_uses_the_rocm_platform(tmp_path: Path) -> None:
    node = make_amd_node(tmp_path / "node", vllm="0.33.0")
    (node.site / "amdsmi").mkdir()
    # amdsmi's API as vLLM's rocm_platform_plugin() calls it (one processor handle per GPU).
    (node.site / "amdsmi" / "__init__.py").write_text(
        "def amdsmi_init():\n    pass\n\ndef amdsmi_shut_down():\n    pass\n\n"
        "def amdsmi_get_processor_handles():\n    return [object()]\n")
    _, doc, _ = run_probe(node)
    vllm = doc["facts"]["frameworks"]["vllm"]
    assert (vllm["outcome"], vllm["platform"], vllm["has_triton"]) == (
        "triton", "RocmPlatform", True)
    assert vllm["detail"] == "vLLM (RocmPlatform) uses Triton on the GPU (HAS_TRITON)"


def test_an_nvidia_node_has_no_amd_facts_or_checks(tmp_path: Path) -> None:
    rc, doc, _ = run_probe(make_node(tmp_path / "node"))
    assert (rc, doc["triton"]["backend"]) == (0, "cuda")
    assert "gpu_vendor" not in doc["facts"] and "amd" not in doc["facts"]
    assert "hip" not in doc["facts"]["torch"]
    assert [c["id"] for c in doc["checks"]] == [i.id for i in vendor_checks("nvidia")]


def test_deep_kernel_runs_through_the_hip_driver(tmp_path: Path) -> None:
    node = make_amd_node(tmp_path / "node", gpus=2)
    rc, doc, stderr = run_probe(node, "--deep")
    by_id = {check["id"]: check for check in doc["checks"]}
    assert (rc, doc["triton"]["verdict"], stderr) == (0, "gpu", "")
    assert by_id["triton_kernel"]["summary"] == ("JIT kernel verified on 2 GPU(s) in a fresh "
                                                 "cache")


def test_a_warm_cache_hides_the_missing_compiler_on_amd_too(tmp_path: Path) -> None:
    rc, doc, by_id = probe(tmp_path, compiler=False, warm_cache=True)
    assert (rc, doc["triton"]["verdict"], doc["triton"]["backend"], doc["triton"]["cause"]) == (
        0, "gpu", "hip", "stale_cache_masks_compiler")
    assert (by_id["no_c_compiler"]["status"], by_id["stale_cache_masks_compiler"]["status"]) == (
        "warn", "warn")


ROCMINFO = """#!/bin/sh
echo 'ROCk module version 6.12.12 is loaded'
echo '=====================    '
echo 'HSA System Attributes    '
echo '=====================    '
echo '*******                  '
echo 'Agent 1                  '
echo '*******                  '
echo '  Name:                    AMD EPYC 9654 96-Core Processor'
echo '  Marketing Name:          AMD EPYC 9654 96-Core Processor'
echo '  Device Type:             CPU'
echo '*******                  '
echo 'Agent 2                  '
echo '*******                  '
echo '  Name:                    gfx942                             '
echo '  Marketing Name:          AMD Instinct MI300X'
echo '  Device Type:             GPU'
"""


def test_rocminfo_where_present_lists_the_gpu_agents(tmp_path: Path) -> None:
    node = make_amd_node(tmp_path / "node")
    (node.bindir / "rocminfo").write_text(ROCMINFO)
    (node.bindir / "rocminfo").chmod(0o755)
    _, doc, _ = run_probe(node)
    assert doc["facts"]["amd"]["rocminfo"] == {"gfx": ["gfx942"]}
    _, doc, _ = run_probe(make_amd_node(tmp_path / "without"))
    assert doc["facts"]["amd"]["rocminfo"] is None
