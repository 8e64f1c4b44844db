"""The FLA check against the real flash-linear-attention wheels, one release per layout.

The wheels are pure Python and are fetched once by scripts/fetch_test_wheels.py (scripts/test.sh
runs it) into .test-wheels/; here they are only unpacked over the fake node's stub torch/triton,
so FLA's own detection code decides, and the probe must report its verdict, its warning and the
exception it swallowed, whatever file the release keeps them in.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import make_node, run_probe

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".test-wheels"
NO_CC = ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable "
         "or set triton.knobs.build.impl.")
WARNING = "UserWarning: Triton is not supported on current platform, roll back to CPU."

#: (release, wheels to install, layout the probe must name, device_platform on a healthy GPU)
RELEASES = [
    ("0.1", ["flash_linear_attention-0.1"], "utils.py", "nvidia"),
    ("0.3.0", ["flash_linear_attention-0.3.0"], "utils.py", "nvidia"),
    ("0.4.2", ["flash_linear_attention-0.4.2", "fla_core-0.4.2"], "utils.py", "cuda"),
    ("0.5.0", ["fla_core-0.5.0"], "utils.py", "cuda"),
    ("0.5.2", ["flash_linear_attention-0.5.2", "fla_core-0.5.2"], "utils/_device.py", "cuda"),
    ("0.6.0", ["flash_linear_attention-0.6.0", "fla_core-0.6.0"], "utils/hardware.py", "cuda"),
]


def install(site: Path, names: list[str], einops: bool = True) -> None:
    """Install wheels as pip does for pure-Python ones: unpack, .dist-info included; with
    einops, which every release's kernels import (a requirement of each)."""
    for name in names + (["einops-0.8.2"] if einops else []):
        wheel = WHEELS / f"{name}-py3-none-any.whl"
        if not wheel.is_file():
            pytest.skip(f"{wheel.name} not fetched: run scripts/fetch_test_wheels.py")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)


def fla_check(doc: dict[str, Any]) -> dict[str, Any]:
    checks: list[dict[str, Any]] = doc["checks"]  # type: ignore[assignment]
    return next(c for c in checks if c["id"] == "fla_fallback_hidden")


@pytest.mark.parametrize(("release", "wheels", "layout", "platform"), RELEASES,
                         ids=[r[0] for r in RELEASES])
def test_fla_release_without_compiler_reports_the_swallowed_error(
        tmp_path: Path, release: str, wheels: list[str], layout: str, platform: str) -> None:
    node = make_node(tmp_path / "node", compiler=False)
    install(node.site, wheels)
    code, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert code == 1
    assert doc["triton"]["cause"] == "no_c_compiler"
    assert check["status"] == "fail"
    assert check["summary"].startswith(f"FLA {release} falls back to CPU (device_platform=cpu)")
    assert check["evidence"]["layout"] == layout
    assert check["evidence"]["warnings"][0] == WARNING
    assert check["evidence"]["swallowed"] == NO_CC
    assert NO_CC in check["summary"]
    facts = doc["facts"]["fla"]
    assert facts["version"] == release and facts["swallowed"] == NO_CC
    assert facts["warning"] == WARNING and facts["device_platform"] == "cpu"
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "cpu-fallback"


@pytest.mark.parametrize(("release", "wheels", "layout", "platform"), RELEASES,
                         ids=[r[0] for r in RELEASES])
def test_fla_release_on_a_healthy_gpu_runs(
        tmp_path: Path, release: str, wheels: list[str], layout: str, platform: str) -> None:
    node = make_node(tmp_path / "node")
    install(node.site, wheels)
    code, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert code == 0, check
    assert check["status"] == "pass"
    assert check["summary"] == (f"FLA {release} runs on the GPU (device_platform={platform}, "
                                f"from fla/{layout})")
    assert check["evidence"]["swallowed"] is None and check["evidence"]["warnings"] == []
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "gpu"


def test_fla_layout_unknown_to_the_probe_is_reported_not_crashed(tmp_path: Path) -> None:
    """A future release that moved the detection again: `unknown`, with the import error."""
    node = make_node(tmp_path / "node")
    (node.site / "fla/utils").mkdir(parents=True)
    (node.site / "fla/__init__.py").write_text('__version__ = "9.0.0"\n')
    (node.site / "fla/utils/__init__.py").write_text("from fla.utils.platforms import device\n")
    info = node.site / "flash_linear_attention-9.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash-linear-attention\n"
                                   "Version: 9.0.0\n\n")
    (info / "RECORD").write_text("fla/__init__.py,,\n")
    _, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert check["status"] == "warn"
    assert check["evidence"]["layout"] == "unknown"
    assert check["evidence"]["error"] == (
        "ModuleNotFoundError: No module named 'fla.utils.platforms'")
    assert check["summary"].startswith("FLA 9.0.0: layout unknown to this probe")
    assert doc["triton"]["verdict"] == "gpu"
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "unknown"


def test_fla_without_einops_cannot_import_its_kernels(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    install(node.site, ["flash_linear_attention-0.6.0", "fla_core-0.6.0"], einops=False)
    code, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert (code, check["status"], doc["triton"]["cause"]) == (1, "fail", "fla_import_fails")
    assert check["summary"] == ("FLA 0.6.0 cannot import its kernels: fla-core 0.6.0 requires "
                                "einops (not installed)")
    assert check["fix"] == f"{node.python} -m pip install 'einops'"
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "import-fails"
    assert doc["triton"]["verdict"] != "gpu"


def test_a_half_upgraded_fla_names_the_pin_it_breaks(tmp_path: Path) -> None:
    # pip install -U flash-linear-attention --no-deps: the kernels stay at fla-core 0.5.2.
    node = make_node(tmp_path / "node")
    install(node.site, ["fla_core-0.5.2", "flash_linear_attention-0.6.0"])
    _, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert check["status"] == "fail"
    assert "flash-linear-attention 0.6.0 requires fla-core==0.6.0 (fla-core 0.5.2 installed)" in (
        check["summary"])
    assert check["fix"] == f"{node.python} -m pip install 'fla-core==0.6.0'"  # once, no extras
    frameworks = doc["facts"]["frameworks"]
    assert frameworks["fla"]["outcome"] == "import-fails"
    # Triton itself runs: torch.compile is not blamed for FLA (seen on the H200 before).
    assert frameworks["inductor"]["outcome"] == "triton"


def test_fla_on_a_torch_older_than_it_supports(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", torch="2.5.1+cu124", torch_cuda="12.4")
    install(node.site, ["flash_linear_attention-0.6.0", "fla_core-0.6.0"])
    _, doc, _ = run_probe(node)
    check = fla_check(doc)
    assert check["summary"] == ("FLA 0.6.0 cannot import its kernels: fla-core 0.6.0 requires "
                                "torch>=2.7.0 (torch 2.5.1 installed)")
    assert doc["triton"]["cause"] == "fla_import_fails"
