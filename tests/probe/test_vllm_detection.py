"""vLLM's own decision, by its real code: the probe imports vLLM 0.33.0's files on the node
(vllm/__init__, vllm.platforms.current_platform, vllm/triton_utils/importing.py's HAS_TRITON),
read out of the real wheel by scripts/fetch_test_wheels.py, and reports what they decided with
vLLM's own log lines. Triton's backends are Triton 3.9's real discovery and drivers; NVML is the
fake node's libnvidia-ml.so.1 (the real pynvml vLLM vendors loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import TRITON_BACKENDS, VLLM_FILES, make_node, run_probe

pytestmark = pytest.mark.skipif(
    not (VLLM_FILES.is_dir() and TRITON_BACKENDS.is_dir()),
    reason="needs vLLM's and Triton's files (scripts/fetch_test_wheels.py)")


def vllm(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    node = make_node(tmp_path / "node", vllm="0.33.0", **kwargs)
    _, doc, stderr = run_probe(node)
    assert stderr == ""
    found: dict[str, Any] = doc["facts"]["frameworks"]["vllm"]
    return found


def test_a_healthy_node_is_vllms_cuda_platform_with_triton(tmp_path: Path) -> None:
    found = vllm(tmp_path)
    assert (found["outcome"], found["platform"], found["has_triton"]) == (
        "triton", "NvmlCudaPlatform", True)


def test_nvml_unknown_error_leaves_vllm_without_a_platform(tmp_path: Path) -> None:
    # nvmlInit 999 (device access revoked under a running container): vLLM's
    # cuda_platform_plugin() catches the NVMLError at debug level, no platform is found.
    found = vllm(tmp_path, nvml_rc=999)
    assert found["outcome"] == "import-fails"
    assert found["platform"] == "UnspecifiedPlatform"
    assert "CUDA platform is not available because: Unknown Error" in found["detail"]


def test_vllm_ignores_an_extra_cpu_backend_but_not_another_one(tmp_path: Path) -> None:
    # vLLM leaves the "cpu" backend out of its count (its own comment says so): HAS_TRITON holds.
    assert vllm(tmp_path / "cpu", extra_backend="cpu")["has_triton"] is True
    # Any other always-active backend makes two: vLLM disables Triton and logs why.
    found = vllm(tmp_path / "shim", extra_backend="shim")
    assert (found["outcome"], found["has_triton"]) == ("triton-disabled", False)
    assert "Triton is installed but 2 active driver(s) found (expected 1)" in found["detail"]


def test_vllms_extension_built_for_another_torch_fails_the_import(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", vllm="0.33.0")
    # What the loader raises for vLLM's compiled ops built against another torch.
    (node.site / "vllm" / "_C_stable_libtorch.py").write_text(
        "raise ImportError(__file__[:-3] + '.abi3.so: undefined symbol: "
        "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_RKSs')\n")
    _, doc, _ = run_probe(node)
    found = doc["facts"]["frameworks"]["vllm"]
    assert found["outcome"] == "import-fails"
    assert found["detail"].startswith("vLLM's platform detection raises: ImportError: ")
    assert "undefined symbol" in found["detail"]


def test_vllm_target_device_cpu_is_vllms_own_cpu_platform(tmp_path: Path) -> None:
    found = vllm(tmp_path, env={"VLLM_TARGET_DEVICE": "cpu"})
    assert (found["outcome"], found["platform"]) == ("cpu", "CpuPlatform")
    assert "VLLM_TARGET_DEVICE is set to CPU" in found["detail"]
