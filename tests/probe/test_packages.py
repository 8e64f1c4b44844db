"""Packages as installed: a Triton or torch with files gone is named before what follows from it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.nodeenv import make_node, run_probe


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in doc["checks"]}


def _record(site: Path, dist: str, *lines: str) -> None:
    """Add lines to a distribution's RECORD, as pip writes every file it installed."""
    (info,) = site.glob(f"{dist}-*.dist-info")
    with open(info / "RECORD", "a") as handle:
        handle.writelines(line + ",sha256=x,1\n" for line in lines)


def test_a_triton_without_its_nvidia_backend_is_named_not_ptxas(tmp_path: Path) -> None:
    # An interrupted upgrade: pip's RECORD lists the NVIDIA backend and its ptxas, both gone.
    node = make_node(tmp_path / "node", ptxas=None)
    backend = node.site / "triton" / "backends" / "nvidia"
    files = sorted(str(p.relative_to(node.site)) for p in backend.rglob("*.py"))[:3]
    _record(node.site, "triton", *files, "triton/backends/nvidia/bin/ptxas")
    shutil.rmtree(backend)
    rc, doc, stderr = run_probe(node)
    checks = by_id(doc)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback",
                                                        "triton_install_broken")
    summary = checks["triton_install_broken"]["summary"]
    assert "triton/backends/nvidia/" in summary and "lacks" in summary
    # The reinstall, with the node's own interpreter and the installed version.
    assert f"{node.python} -m pip install --force-reinstall --no-deps triton==3.6.0" in (
        triton["fix"])
    assert stderr == ""


def test_two_triton_distributions_are_named_with_the_reinstall(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", extra_triton_dist="pytorch-triton 3.5.0")
    rc, doc, _ = run_probe(node)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["cause"]) == (1, "triton_installed")
    assert "pytorch-triton 3.5.0" in by_id(doc)["triton_installed"]["summary"]
    assert sorted(by_id(doc)["triton_install_broken"]["evidence"]["distributions"]) == [
        "pytorch-triton 3.5.0", "triton 3.6.0"]
    assert f"{node.python} -m pip uninstall -y pytorch-triton triton" in triton["fix"] or (
        f"{node.python} -m pip uninstall -y triton pytorch-triton" in triton["fix"])


def test_a_torch_with_files_gone_is_named(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    _record(node.site, "torch", "torch/lib/libtorch_cuda.so", "torch/_C.so")
    rc, doc, _ = run_probe(node)
    triton = doc["triton"]
    assert isinstance(triton, dict)
    assert (rc, triton["cause"]) == (1, "torch_install_broken")
    summary = by_id(doc)["torch_install_broken"]["summary"]
    assert "torch/lib/libtorch_cuda.so" in summary and "torch/_C.so" in summary
    assert "-m pip install --force-reinstall --no-deps torch==2.11.0+cu130" in triton["fix"]


def test_a_complete_install_passes(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    init = "triton/__init__.py"
    _record(node.site, "triton", init)
    rc, doc, _ = run_probe(node)
    assert rc == 0
    assert by_id(doc)["triton_install_broken"]["status"] == "pass"
    assert by_id(doc)["torch_install_broken"]["status"] == "pass"
