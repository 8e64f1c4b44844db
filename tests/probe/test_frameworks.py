"""What each framework will do on a node: FLA, vLLM and torch.compile's inductor decide apart.

vLLM counts Triton as usable when exactly one backend driver is active (it never compiles), so
a missing compiler passes its check and fails at the first kernel; inductor wants a CUDA device
of capability >= 7.0 and calls get_current_target() at code generation; FLA swallows the
exception and falls back. The outcomes land in facts.frameworks (one line each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import make_node, run_probe

VLLM_DISABLED = ("vLLM (NvmlCudaPlatform) sets HAS_TRITON = False: Triton is installed but 0 "
                 "active driver(s) found (expected 1). Disabling Triton to prevent runtime "
                 "errors.")
NO_CXX = ("no C++ compiler for its CPU/cpp-wrapper path (InvalidCxxCompiler: No working C++ "
          "compiler found in torch._inductor.config.cpp.cxx: (None, 'g++'))")

# (case, make_node arguments, {framework: outcome})
CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("healthy", {}, {"fla": "gpu", "vllm": "triton", "inductor": "triton"}),
    ("no_c_compiler", {"compiler": False},
     {"fla": "cpu-fallback", "vllm": "cpu-fallback", "inductor": "fails-at-kernel"}),
    ("fabric_manager_not_ready", {"init_rc": 802},
     {"fla": "cpu-fallback", "vllm": "triton-disabled", "inductor": "cpu-only"}),
    ("driver_too_old_for_bundled_ptxas", {
        "cuda_driver_version": 11080, "torch": "2.5.1+cu118", "torch_cuda": "11.8",
        "triton": "3.1.0", "ptxas": "12.4", "ptxas_blackwell": None},
     {"fla": "fails-at-kernel", "vllm": "fails-at-kernel", "inductor": "fails-at-kernel"}),
    ("triton_not_installed", {"triton": None, "fla": None},
     {"fla": "not-installed", "vllm": "no-triton", "inductor": "no-triton"}),
    ("pascal", {"compute_capability": "6.1", "gpu_name": "NVIDIA GeForce GTX 1080",
                "torch_arch": ("sm_60", "sm_61")},
     {"fla": "fails-at-kernel", "vllm": "fails-at-kernel", "inductor": "gpu-unsupported"}),
]


@pytest.mark.parametrize(("case", "kwargs", "outcomes"), CASES, ids=[c[0] for c in CASES])
def test_framework_outcomes(tmp_path: Path, case: str, kwargs: dict[str, Any],
                            outcomes: dict[str, str]) -> None:
    node = make_node(tmp_path / "node", **{"fla": "0.6.0", "vllm": "0.33.0", "cxx": True,
                                           **kwargs})
    _, doc, _ = run_probe(node)
    frameworks = doc["facts"]["frameworks"]
    assert {name: fw["outcome"] for name, fw in frameworks.items()} == outcomes
    for fw in frameworks.values():
        assert fw["detail"] and "\n" not in fw["detail"]


def test_framework_lines_name_the_real_texts(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", fla="0.6.0", vllm="0.33.0", init_rc=802)
    _, doc, _ = run_probe(node)
    frameworks = doc["facts"]["frameworks"]
    vllm = frameworks["vllm"]
    assert (vllm["version"], vllm["outcome"], vllm["detail"]) == (
        "0.33.0", "triton-disabled", VLLM_DISABLED)
    assert (vllm["platform"], vllm["has_triton"]) == ("NvmlCudaPlatform", False)
    assert frameworks["inductor"]["detail"] == (
        "torch.compile (inductor): no CUDA device: compiles for the CPU only; " + NO_CXX)
    assert frameworks["inductor"]["cxx"] is None
    assert frameworks["fla"]["detail"] == (
        "FLA 0.6.0 falls back to CPU: RuntimeError: 0 active drivers ([]). There should only "
        "be one.")


def test_no_compiler_fails_vllm_later_not_at_its_check(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False, vllm="0.33.0", cxx=True)
    _, doc, _ = run_probe(node)
    vllm = doc["facts"]["frameworks"]["vllm"]
    # vLLM's own HAS_TRITON passes (one active driver); its FLA copy then falls back silently.
    assert (vllm["platform"], vllm["has_triton"]) == ("NvmlCudaPlatform", True)
    assert vllm["fla_copy"]["outcome"] == "cpu-fallback"
    assert vllm["detail"] == ("vLLM: its copy of FLA's detection (catches (RuntimeError, "
                              "AttributeError): silent) says cpu, and logs nothing")
    inductor = doc["facts"]["frameworks"]["inductor"]
    assert inductor["detail"] == ("torch.compile (inductor): BackendCompilerFailed at code "
                                  "generation: no C compiler; C++ compiler " + str(
                                      node.bindir / "g++"))
