"""xformers, Liger-Kernel, mamba-ssm and causal-conv1d decided by their own code: the probe
imports each package on the node and calls its own device decision (xformers'
`_is_triton_available()`, Liger-Kernel's `infer_device()`). The real files: xformers 0.0.35's
package files and the Liger-Kernel 0.8.5 wheel, mamba-ssm 2.3.2.post1's and causal-conv1d
1.7.0's Python sources from their sdists (scripts/fetch_test_wheels.py). Their CUDA extensions
are built at install on a real node; here a missing one is the real failure of a source-only
install, and an empty module stands in for a built one. mamba-ssm's whole import is not
reached over the suite's stub torch (its module-level `torch.autograd.Function.apply`): only its
failing import is tested here; the healthy one is checked on the H200 (docs/validation.md).
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import TEST_WHEELS, make_node, run_probe

SOURCES = ("xformers-0.0.35", "mamba-ssm-2.3.2.post1", "causal-conv1d-1.7.0")
WHEELS = ("liger_kernel-0.8.5", "einops-0.8.2")

pytestmark = pytest.mark.skipif(
    not all((TEST_WHEELS / s / ".complete").is_file() for s in SOURCES) or not all(
        (TEST_WHEELS / f"{w}-py3-none-any.whl").is_file() for w in WHEELS),
    reason="needs the files of scripts/fetch_test_wheels.py")


def frameworks(tmp_path: Path, extensions: tuple[str, ...] = (),
               **kwargs: Any) -> dict[str, Any]:
    node = make_node(tmp_path / "node", **kwargs)
    for source in SOURCES:
        shutil.copytree(TEST_WHEELS / source, node.site, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".complete"))
    for wheel in WHEELS:
        with zipfile.ZipFile(TEST_WHEELS / f"{wheel}-py3-none-any.whl") as archive:
            archive.extractall(node.site)
    for name in extensions:  # a built CUDA extension, as Python sees the loaded .so
        (node.site / f"{name}.py").write_text("")
    _, doc, _ = run_probe(node)
    found: dict[str, Any] = doc["facts"]["frameworks"]
    return found


def test_healthy_node_each_decides_for_the_gpu(tmp_path: Path) -> None:
    found = frameworks(tmp_path, ("selective_scan_cuda", "causal_conv1d_cuda"))
    assert {k: found[k]["outcome"] for k in ("xformers", "liger_kernel", "causal_conv1d")} == {
        "xformers": "triton", "liger_kernel": "gpu", "causal_conv1d": "gpu"}
    assert found["xformers"]["detail"] == "xformers: _is_triton_available() is True"
    assert found["liger_kernel"]["detail"] == "Liger-Kernel: infer_device() = cuda"


def test_sources_without_their_built_extension_fail_at_import(tmp_path: Path) -> None:
    found = frameworks(tmp_path)
    assert found["mamba_ssm"] == {"installed": True, "outcome": "import-fails", "detail": (
        "mamba-ssm: import mamba_ssm fails: ModuleNotFoundError: No module named "
        "'selective_scan_cuda'")}
    assert found["causal_conv1d"]["detail"] == (
        "causal-conv1d: import causal_conv1d fails: ModuleNotFoundError: No module named "
        "'causal_conv1d_cuda'")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"env": {"XFORMERS_FORCE_DISABLE_TRITON": "1"}}, "_is_triton_available() is False"),
    ({"compute_capability": "7.5", "gpu_name": "Tesla T4", "torch_arch": ("sm_75",)},
     "_is_triton_available() is False (no CUDA device, or capability < 8.0)"),
], ids=["force-disable", "turing"])
def test_xformers_turns_its_triton_off_by_its_own_rules(tmp_path: Path, kwargs: dict[str, Any],
                                                        words: str) -> None:
    found = frameworks(tmp_path, **kwargs)
    assert found["xformers"]["outcome"] == "triton-off"
    assert words in found["xformers"]["detail"]


def test_a_missing_compiler_fails_their_first_kernel(tmp_path: Path) -> None:
    found = frameworks(tmp_path, ("selective_scan_cuda", "causal_conv1d_cuda"), compiler=False)
    assert found["xformers"]["detail"] == ("xformers: _is_triton_available() is True, its first "
                                           "Triton kernel fails: no C compiler")
    assert {found[k]["outcome"] for k in ("liger_kernel", "causal_conv1d")} == {
        "fails-at-kernel"}


def test_liger_without_cuda_is_cpu_only(tmp_path: Path) -> None:
    found = frameworks(tmp_path, init_rc=802)
    assert found["liger_kernel"] == {"installed": True, "outcome": "cpu-only", "detail": (
        "Liger-Kernel: infer_device() = cpu: its Triton kernels get no GPU")}
