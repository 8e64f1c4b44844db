"""The driver layer's open ends: cuInit 999 told apart, exclusive-process mode (error 46), device
access revoked under a running container (NVML's 'Unknown Error'), NVML missing for vLLM."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import make_node, run_probe


def checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in doc["checks"]}


@pytest.mark.parametrize(("kwargs", "status", "words"), [
    ({"compute_mode": 3, "ctx_rc": 46}, "fail", "held by another process: CUDA error 46"),
    ({"compute_mode": 3}, "warn", "Exclusive_Process mode: one process at a time"),
    ({"compute_mode": 2}, "fail", "compute mode Prohibited"),
    ({}, "pass", "compute mode Default"),
    ({"nvml": False}, "skip", "compute mode unknown"),
], ids=["exclusive-busy", "exclusive-free", "prohibited", "default", "no-nvml"])
def test_compute_mode(tmp_path: Path, kwargs: dict[str, Any], status: str, words: str) -> None:
    node = make_node(tmp_path / "node", gpus=2, **kwargs)
    _, doc, _ = run_probe(node)
    check = checks(doc)["gpu_exclusive_busy"]
    assert check["status"] == status
    assert words in check["summary"]
    if status == "fail":
        assert doc["triton"]["cause"] == "gpu_exclusive_busy"
        assert "nvidia-smi -i N -c DEFAULT" in doc["triton"]["fix"]


@pytest.mark.parametrize(("kwargs", "words", "fix"), [
    ({}, "on the host with every device node usable", "reload nvidia_uvm"),
    ({"container": "lxc"}, "in a lxc container whose device nodes all open", "restart the "
     "container"),
    ({"nvml_rc": 999}, "with NVML's 'Unknown Error'", "reload the driver"),
], ids=["host", "container", "nvml-unknown"])
def test_cuinit_999_causes_get_their_own_fix(tmp_path: Path, kwargs: dict[str, Any], words: str,
                                             fix: str) -> None:
    node = make_node(tmp_path / "node", init_rc=999, **kwargs)
    _, doc, _ = run_probe(node)
    check = checks(doc)["zero_active_drivers"]
    assert (doc["triton"]["cause"], check["status"]) == ("zero_active_drivers", "fail")
    assert check["summary"].startswith("cuInit failed: CUDA_ERROR_UNKNOWN (999)")
    assert words in check["summary"]
    assert check["fix"].startswith(fix)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chattr"),
                    reason="needs root and chattr: an immutable node is what answers EPERM here")
def test_device_access_revoked_under_a_running_container(tmp_path: Path) -> None:
    # A device cgroup that no longer allows the nodes makes open() fail with EPERM while the
    # nodes are still there; an immutable file gives the same errno to a read-write open.
    node = make_node(tmp_path / "node", container="docker", nvml_rc=999, init_rc=999,
                     smi_error="Failed to initialize NVML: Unknown Error")
    nodes = [str(p) for p in (node.sysroot / "dev").iterdir() if p.name.startswith("nvidia")]
    if subprocess.run(["chattr", "+i", *nodes], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        _, doc, _ = run_probe(node)
    finally:
        subprocess.run(["chattr", "-i", *nodes], check=True)
    by_id = checks(doc)
    assert (doc["triton"]["cause"], by_id["cgroup_devices_revoked"]["status"]) == (
        "cgroup_devices_revoked", "fail")
    assert by_id["dev_nodes_missing"]["status"] == "skip"
    assert "recreate the container" in doc["triton"]["fix"]


def test_nvml_missing_where_vllm_needs_it(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", vllm="0.33.0", nvml=False)
    _, doc, _ = run_probe(node)
    vllm = doc["facts"]["frameworks"]["vllm"]
    assert vllm["outcome"] == "import-fails"
    assert "Failed to infer device type" in vllm["detail"]
    assert "libnvidia-ml.so.1" in vllm["detail"]
    # Triton itself does not need NVML.
    assert doc["triton"]["verdict"] == "gpu"
