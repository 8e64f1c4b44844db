"""Every catalogue row the probe detects, on a fake node built for it: exact verdict and cause."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.checks import vendor_checks
from fleetcheck.probe.results import parse_probe_output
from tests.nodeenv import make_node, run_probe

#: A forward-compat libcuda (CUDA's compat dir) on a GeForce, whose cuInit refuses it (804).
COMPAT_GEFORCE: dict[str, Any] = {"init_rc": 804, "libcuda_subdir": "usr/local/cuda/compat",
                                  "libcuda_version": "575.57.08", "compute_capability": "8.9",
                                  "gpu_name": "NVIDIA GeForce RTX 4090"}
#: The path Apptainer users see in Triton's assertion; it does not exist on the test machine.
STALE_LIBCUDA = "/usr/local/cuda/compat/lib/libcuda.so.1"
#: An R520 driver (CUDA 11.8) under a cu118 torch and Triton 3.1 with its bundled ptxas 12.4.
OLD_DRIVER: dict[str, Any] = {"cuda_driver_version": 11080, "torch": "2.5.1+cu118",
                              "torch_cuda": "11.8", "triton": "3.1.0", "ptxas": "12.4",
                              "ptxas_blackwell": None, "compute_capability": "8.0",
                              "gpu_name": "NVIDIA A100-SXM4-80GB", "driver": "520.61.05"}

# (case id, make_node arguments, probe arguments, verdict, cause, probe status, exit code,
#  {check id: status} that must hold)
CASES: list[tuple[str, dict[str, Any], tuple[str, ...], str, str | None, str, int,
                  dict[str, str]]] = [
    ("healthy", {}, (), "gpu", None, "ok", 0, {"triton_target": "pass"}),
    ("no_gpu", {"gpu": False}, (), "no-gpu", None, "warn", 0,
     {"gpu_present": "warn", "triton_target": "skip"}),
    ("dev_nodes_missing_lxc", {"gpu": "no-dev-nodes", "container": "lxc"}, (), "cpu-fallback",
     "dev_nodes_missing", "fail", 1, {"gpu_present": "pass", "dev_nodes_missing": "fail"}),
    ("uvm_not_passed", {"gpu": "no-uvm", "container": "lxc"}, (), "cpu-fallback",
     "dev_nodes_missing", "fail", 1, {"dev_nodes_missing": "fail", "zero_active_drivers": "fail"}),
    ("driver_mismatch", {"gpu": "mismatch"}, (), "cpu-fallback", "driver_userspace_mismatch",
     "fail", 1, {"driver_userspace_mismatch": "fail"}),
    ("no_libcuda", {"gpu": "no-libcuda"}, (), "cpu-fallback", "zero_active_drivers", "fail", 1,
     {"zero_active_drivers": "fail"}),
    ("cuda_visible_devices_empty", {"env": {"CUDA_VISIBLE_DEVICES": ""}}, (), "gpu", None, "ok",
     0, {"zero_active_drivers": "pass"}),
    ("driver_too_old", {"cuda_driver_version": 12020}, (), "cpu-fallback", "driver_too_old",
     "fail", 1, {"driver_too_old": "fail", "torch_cuda": "fail"}),
    ("cpu_only_torch", {"torch": "2.11.0+cpu", "torch_cuda": None}, (), "cpu-fallback",
     "torch_cuda", "fail", 1, {"torch_cuda": "fail", "triton_target": "fail"}),
    ("torch_lacks_arch", {"compute_capability": "12.0", "gpu_name": "NVIDIA RTX PRO 6000",
                          "torch": "2.5.1+cu124", "torch_cuda": "12.4",
                          "torch_arch": ("sm_50", "sm_80", "sm_86", "sm_90")}, (),
     "cpu-fallback", "torch_lacks_arch", "fail", 1, {"torch_lacks_arch": "fail"}),
    ("triton_not_installed", {"triton": None}, (), "not-installed", "triton_installed", "warn", 0,
     {"triton_installed": "warn", "no_c_compiler": "skip"}),
    ("two_triton_distributions", {"extra_triton_dist": "pytorch-triton 3.5.0"}, (),
     "cpu-fallback", "triton_installed", "fail", 1, {"triton_installed": "fail"}),
    # Triton 2.x builds and runs kernels (torch.compile on torch 2.1-2.3): gpu; only what
    # needs driver.active (FLA, vLLM) falls back, and its own checks say so.
    ("triton_2x", {"triton": "2.3.1", "ptxas": "12.3"}, (), "gpu", None, "ok", 0,
     {"triton_2x": "pass", "triton_target": "pass", "triton_install_broken": "pass"}),
    ("triton_2_1", {"triton": "2.1.0", "ptxas": "12.3"}, (), "gpu", None, "ok", 0,
     {"triton_2x": "pass", "triton_target": "pass", "triton_install_broken": "pass"}),
    ("cc_env_invalid", {"cc_env": "/nonexistent/gcc"}, (), "cpu-fallback", "cc_env_invalid",
     "fail", 1, {"cc_env_invalid": "fail", "no_c_compiler": "pass", "triton_target": "fail"}),
    ("no_c_compiler", {"compiler": False}, (), "cpu-fallback", "no_c_compiler", "fail", 1,
     {"no_c_compiler": "fail", "triton_target": "fail", "no_linker": "skip"}),
    ("no_linker", {"linker": False}, (), "cpu-fallback", "no_linker", "fail", 1,
     {"no_linker": "fail", "triton_target": "fail"}),
    ("libc_headers_missing", {"libc_headers": False}, (), "cpu-fallback", "libc_headers_missing",
     "fail", 1, {"libc_headers_missing": "fail", "triton_target": "fail"}),
    ("python_headers_missing", {"python_headers": False}, (), "cpu-fallback",
     "python_headers_missing", "fail", 1, {"python_headers_missing": "fail"}),
    ("ldconfig_binary_missing", {"ldconfig": False}, (), "cpu-fallback",
     "ldconfig_binary_missing", "fail", 1,
     {"ldconfig_binary_missing": "fail", "libcuda_not_in_ldcache": "skip"}),
    ("ldconfig_missing_but_libcuda_path", {"ldconfig": False, "env": {
        "TRITON_LIBCUDA_PATH": "LIBDIR"}}, (), "gpu", None, "ok", 0,
     {"ldconfig_binary_missing": "pass"}),
    ("libcuda_not_in_ldcache", {"ldcache_has_libcuda": False}, (), "cpu-fallback",
     "libcuda_not_in_ldcache", "fail", 1,
     {"libcuda_not_in_ldcache": "fail", "zero_active_drivers": "pass"}),
    ("libcuda_unversioned_missing", {"triton": "3.5.0", "libcuda_unversioned": False}, (),
     "cpu-fallback", "libcuda_unversioned_missing", "fail", 1,
     {"libcuda_unversioned_missing": "fail", "triton_target": "fail"}),
    ("cache_dir_unwritable", {"cache": "unwritable"}, (), "cpu-fallback", "cache_dir_unwritable",
     "fail", 1, {"cache_dir_unwritable": "fail"}),
    ("cache_dir_noexec", {"cache": "noexec"}, (), "cpu-fallback", "cache_dir_noexec", "fail", 1,
     {"cache_dir_noexec": "fail"}),
    ("ptxas_missing", {"ptxas": None}, (), "cpu-fallback", "ptxas_missing", "fail", 1,
     {"ptxas_missing": "fail"}),
    ("ptxas_override_unparsed", {"triton": "3.2.0", "env": {"TRITON_PTXAS_PATH": "PTXAS128"}},
     (), "cpu-fallback", "ptxas_override_unparsed", "fail", 1,
     {"ptxas_override_unparsed": "fail"}),
    ("triton_too_old_for_gpu", {"compute_capability": "12.0", "gpu_name": "NVIDIA RTX PRO 6000",
                                "triton": "3.2.0", "ptxas": "12.4", "ptxas_blackwell": None}, (),
     "cpu-fallback", "triton_too_old_for_gpu", "fail", 1,
     {"triton_too_old_for_gpu": "fail", "torch_lacks_arch": "pass", "triton_target": "pass"}),
    ("sm121_needs_ptxas_129", {"compute_capability": "12.1", "gpu_name": "NVIDIA GB10",
                               "triton": "3.5.0", "ptxas": "12.8", "ptxas_blackwell": None}, (),
     "cpu-fallback", "triton_too_old_for_gpu", "fail", 1, {"triton_too_old_for_gpu": "fail"}),
    ("unexplained_target_error", {"triton_error": "something new broke"}, (), "cpu-fallback",
     "triton_target", "fail", 1, {"triton_target": "fail"}),
    ("stale_cache_masks_compiler", {"compiler": False, "warm_cache": True}, (), "gpu",
     "stale_cache_masks_compiler", "warn", 0,
     {"no_c_compiler": "warn", "triton_target": "warn", "stale_cache_masks_compiler": "warn"}),
    ("blackwell_no_allocator", {"compute_capability": "10.0", "gpu_name": "NVIDIA B200",
                                "fla": "0.4.2"}, (), "cpu-fallback", "blackwell_no_allocator",
     "fail", 1, {"blackwell_no_allocator": "fail", "fla_fallback_hidden": "pass"}),
    ("fla_healthy", {"fla": "0.6.0"}, (), "gpu", None, "ok", 0, {"fla_fallback_hidden": "pass"}),
    ("fla_fallback_no_compiler", {"fla": "0.6.0", "compiler": False}, (), "cpu-fallback",
     "no_c_compiler", "fail", 1, {"fla_fallback_hidden": "fail"}),
    # The rows from user reports (second survey), in causal order.
    ("fabric_manager_not_ready", {"init_rc": 802, "gpus": 8, "nvswitches": 4}, (),
     "cpu-fallback", "fabric_manager_not_ready", "fail", 1,
     {"fabric_manager_not_ready": "fail", "zero_active_drivers": "fail", "torch_cuda": "fail"}),
    ("cuda_compat_on_geforce", COMPAT_GEFORCE, (), "cpu-fallback",
     "cuda_compat_on_unsupported_gpu", "fail", 1,
     {"cuda_compat_on_unsupported_gpu": "fail", "driver_userspace_mismatch": "skip"}),
    ("cuda_compat_works", dict(COMPAT_GEFORCE, init_rc=0), (), "gpu", None, "ok", 0,
     {"cuda_compat_on_unsupported_gpu": "pass", "driver_userspace_mismatch": "skip"}),
    ("libcuda_stub_shadowing", {"init_rc": 34, "libcuda_subdir": "usr/local/cuda/lib64/stubs"},
     (), "cpu-fallback", "libcuda_stub_shadowing", "fail", 1,
     {"libcuda_stub_shadowing": "fail", "zero_active_drivers": "fail"}),
    ("ldcache_stale_libcuda_entry", {"ldcache_libcuda": STALE_LIBCUDA}, (), "cpu-fallback",
     "ldcache_stale_libcuda_entry", "fail", 1,
     {"ldcache_stale_libcuda_entry": "fail", "libcuda_not_in_ldcache": "skip",
      "zero_active_drivers": "pass", "triton_target": "fail"}),
    ("driver_too_old_for_bundled_ptxas", OLD_DRIVER, (), "cpu-fallback",
     "driver_too_old_for_bundled_ptxas", "fail", 1,
     {"driver_too_old_for_bundled_ptxas": "fail", "driver_too_old": "pass",
      "triton_target": "pass"}),
    ("cache_on_network_fs", {"cache_fstype": "nfs4"}, (), "gpu", None, "warn", 0,
     {"cache_on_network_fs": "warn", "cache_dir_noexec": "pass"}),
    ("cache_on_fuse", {"cache_fstype": "fuse.juicefs"}, (), "gpu", None, "warn", 0,
     {"cache_on_network_fs": "warn"}),
    ("gpu_arch_unsupported", {"compute_capability": "6.1", "gpu_name": "NVIDIA GeForce GTX 1080",
                              "torch_arch": ("sm_60", "sm_61", "sm_70")}, (), "cpu-fallback",
     "gpu_arch_unsupported", "fail", 1, {"gpu_arch_unsupported": "fail",
                                         "torch_lacks_arch": "pass"}),
    ("deep_healthy", {}, ("--deep",), "gpu", None, "ok", 0, {"triton_kernel": "pass"}),
    ("deep_warm_cache_no_compiler", {"compiler": False, "warm_cache": True}, ("--deep",),
     "cpu-fallback", "no_c_compiler", "fail", 1,
     {"triton_kernel": "fail", "stale_cache_masks_compiler": "warn"}),
]


def _resolve(kwargs: dict[str, Any], root: Path) -> dict[str, Any]:
    """Placeholders that need the node's own paths."""
    env = dict(kwargs.get("env") or {})
    for key, value in env.items():
        if value == "LIBDIR":
            env[key] = str(root / "node" / "lib")
        elif value == "PTXAS128":
            path = root / "ptxas-12.8"
            path.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
            path.chmod(0o755)
            env[key] = str(path)
    return {**kwargs, "env": env} if env else kwargs


@pytest.mark.parametrize(("case", "kwargs", "args", "verdict", "cause", "status", "code",
                          "statuses"), CASES, ids=[c[0] for c in CASES])
def test_catalogue_row(tmp_path: Path, case: str, kwargs: dict[str, Any], args: tuple[str, ...],
                       verdict: str, cause: str | None, status: str, code: int,
                       statuses: dict[str, str]) -> None:
    node = make_node(tmp_path / "node", **_resolve(kwargs, tmp_path))
    rc, doc, stderr = run_probe(node, *args)
    triton = doc["triton"]
    assert (triton["verdict"], triton["cause"], doc["status"], rc) == (verdict, cause, status,
                                                                      code), doc["reason"]
    by_id = {check["id"]: check for check in doc["checks"]}
    assert {cid: by_id[cid]["status"] for cid in statuses} == statuses
    # An NVIDIA (or GPU-less) node's document: every check but the AMD-only ones.
    assert [check["id"] for check in doc["checks"]] == [info.id for info in vendor_checks(
        "nvidia")]
    assert stderr == ""
    # The document is what results.py accepts.
    parsed = parse_probe_output(json.dumps(doc).encode())
    assert parsed.triton.verdict == verdict


def test_fix_names_the_workload_python_and_the_exact_texts(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False)
    _, doc, _ = run_probe(node)
    xy = "{}.{}".format(*sys.version_info[:2])
    assert doc["triton"]["fix"] == (
        f"no C compiler: apt-get install -y gcc libc6-dev python{xy}-dev, or set CC")
    check = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert check["evidence"]["error"] == (
        "RuntimeError: Failed to find C compiler. Please specify via CC environment variable or "
        "set triton.knobs.build.impl.")
    assert check["evidence"]["matches"] == "no_c_compiler"


def test_cc_env_invalid_evidence_is_the_real_error(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", cc_env="/x/gcc")
    _, doc, _ = run_probe(node)
    target = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert target["evidence"]["error"] == (
        "FileNotFoundError: [Errno 2] No such file or directory: '/x/gcc'")
    cc = next(c for c in doc["checks"] if c["id"] == "cc_env_invalid")
    assert cc["evidence"]["expected_error"] == target["evidence"]["error"]


def test_dev_nodes_lxc_facts_and_summary(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", gpu="no-dev-nodes", container="lxc", gpus=2)
    _, doc, _ = run_probe(node)
    assert doc["facts"]["container"] == "lxc"
    assert doc["facts"]["gpu_count"] == 2
    check = next(c for c in doc["checks"] if c["id"] == "dev_nodes_missing")
    assert check["summary"] == ("no /dev/nvidia* device nodes, though the driver lists 2 GPU(s) "
                                "(not passed into the lxc container)")
    assert check["evidence"]["open"] == {"nvidiactl": "ENOENT", "nvidia-uvm": "ENOENT",
                                         "nvidia0": "ENOENT", "nvidia1": "ENOENT"}


def test_healthy_facts(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", gpus=2, fla="0.6.0")
    _, doc, _ = run_probe(node)
    facts = doc["facts"]
    assert facts["gpus"] == [
        {"index": i, "name": "NVIDIA H200", "uuid": f"GPU-{i:08d}-fake", "memory_mib": 143771,
         "compute_capability": "9.0"} for i in range(2)]
    assert facts["driver"] == {"kernel_module": "580.95.05", "userspace": "580.95.05",
                               "cuda_driver_version": "13.0"}
    assert facts["torch"] == {"version": "2.11.0+cu130", "cuda": "13.0", "cuda_available": True,
                              "device_count": 2, "arch_list": list(
                                  ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"))}
    assert facts["triton"]["version"] == "3.6.0"
    assert facts["triton"]["distributions"] == ["triton 3.6.0"]
    assert facts["fla"] == {"version": "0.6.0", "device_platform": "cuda",
                            "layout": "utils.py", "warning": None, "swallowed": None}
    assert facts["compiler"] == {"path": str(node.bindir / "gcc"), "source": "gcc"}
    assert facts["os"] == {"id": "debian", "version_id": "12",
                           "pretty_name": "Debian GNU/Linux 12 (bookworm)", "id_like": None}
    assert facts["memory_bytes"] == 131072000 * 1024


def test_a_cause_no_row_names_says_so_with_the_error(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", triton_error="something new broke")
    _, doc, _ = run_probe(node)
    assert doc["triton"]["cause"] == "triton_target"
    assert doc["triton"]["fix"].startswith("get_current_target() fails: no known cause matches")
    target = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert target["evidence"]["error"] == "RuntimeError: something new broke"
    assert target["evidence"]["matches"] is None


def test_a_ptxas_override_older_than_the_gpu_is_named_with_its_value(tmp_path: Path) -> None:
    """TRITON_PTXAS_PATH at an older CUDA's ptxas that does not know the H100's sm_90: the
    override is the object (its variable and value), not Triton's release; unsetting it, as
    the fix says, makes the node gpu."""
    old = tmp_path / "cuda-11.7" / "ptxas"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 11.7, V11.7.99'\n")
    old.chmod(0o755)
    node = make_node(tmp_path / "node", compute_capability="9.0",
                     gpu_name="NVIDIA H100 80GB HBM3", env={"TRITON_PTXAS_PATH": str(old)})
    rc, doc, _ = run_probe(node)
    triton = doc["triton"]
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback",
                                                        "ptxas_override_unparsed"), doc["reason"]
    assert triton["fix"].startswith(f"TRITON_PTXAS_PATH unusable: unset TRITON_PTXAS_PATH "
                                    f"(now {old}, ptxas 11.7)")
    assert "upgrade" not in triton["fix"]
    check = next(c for c in doc["checks"] if c["id"] == "ptxas_override_unparsed")
    assert check["evidence"]["override"] == {"variable": "TRITON_PTXAS_PATH", "value": str(old)}
    node.env.pop("TRITON_PTXAS_PATH")
    _, doc, _ = run_probe(node)
    assert doc["triton"]["verdict"] == "gpu", doc["reason"]
