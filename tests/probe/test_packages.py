"""Packages as installed: a Triton or torch with files gone is named before what follows from it."""

from __future__ import annotations

import os
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


def test_a_source_checkout_on_pythonpath_is_named_with_the_path_to_take_off(
        tmp_path: Path) -> None:
    """A Triton source checkout without its build on PYTHONPATH shadows the installed wheel:
    a reinstall leaves it shadowed; the fix names the entry and the variable, and taking it
    off makes the node gpu."""
    checkout = tmp_path / "triton-src" / "python"
    (checkout / "triton").mkdir(parents=True)
    # As the repository's python/triton is: its package imports the extension it lacks.
    (checkout / "triton" / "__init__.py").write_text(
        "__version__ = '3.7.0'\nfrom triton._C.libtriton import ir  # noqa\n")
    node = make_node(tmp_path / "node")
    installed = node.env.get("PYTHONPATH")  # the node's site, where its wheels are
    node.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), installed) if p)
    rc, doc, _ = run_probe(node)
    triton = doc["triton"]
    assert (rc, triton["verdict"], triton["cause"]) == (1, "cpu-fallback",
                                                        "triton_install_broken"), doc["reason"]
    check = by_id(doc)["triton_install_broken"]
    assert check["evidence"]["shadowed_by"]["variable"] == "PYTHONPATH"
    assert f"take {checkout} off PYTHONPATH" in triton["fix"]
    assert "force-reinstall" not in triton["fix"]
    assert f"shadows triton 3.6.0 installed in {node.site}" in check["summary"]
    # The fix, applied: the installed wheel is what the workload imports again.
    if installed:
        node.env["PYTHONPATH"] = installed
    else:
        node.env.pop("PYTHONPATH")
    rc, doc, _ = run_probe(node)
    assert doc["triton"]["verdict"] == "gpu", doc["reason"]


def test_a_torch_version_with_a_local_part_is_read_whole(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", torch="2.9.1+rocm6.4")
    # As torch's ROCm wheel names its dist-info: the local version part included.
    (info,) = node.site.glob("torch-*.dist-info")
    info.rename(node.site / "torch-2.9.1+rocm6.4.dist-info")
    _, doc, _ = run_probe(node)
    distributions = by_id(doc)["torch_install_broken"]["evidence"]["distributions"]
    assert distributions == ["torch 2.9.1+rocm6.4"]
