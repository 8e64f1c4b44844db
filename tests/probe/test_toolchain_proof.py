"""The toolchain's proof is one build: Triton's own, where it compiled from nothing.

On a cold Triton cache the workload's own build compiles the driver module with the compiler
the toolchain checks name: that build is both the fresh-cache proof (`triton_target`) and the
toolchain's (`no_linker`, the headers), so the probe runs the compiler once; on a warm cache
the build in the probe's fresh cache is (tests/probe/test_cache_proof.py). Where no build
succeeded the probe compiles a test file of its own, as before; where Triton is not installed,
or the stack used the whole deadline, it does not.
"""

from __future__ import annotations

from pathlib import Path

from tests.nodeenv import gcc_runs as runs
from tests.nodeenv import logging_gcc, make_node, run_probe


def checks(doc: dict) -> dict[str, dict]:
    return {c["id"]: c for c in doc["checks"]}


def test_a_cold_cache_runs_the_compiler_once(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    log = logging_gcc(node)
    _, doc, _ = run_probe(node)
    assert doc["triton"]["verdict"] == "gpu"
    # One run: Triton's own build of its driver module, through the workload's own cache.
    assert len(runs(log)) == 1 and "cuda_utils.c" in runs(log)[0]
    by_id = checks(doc)
    assert by_id["triton_target"]["evidence"]["cache"] == "own"
    linker = by_id["no_linker"]
    assert linker["status"] == "pass"
    assert linker["summary"] == (
        f"compiled and linked a Python extension with {node.bindir / 'gcc'} (Triton's own build)")
    assert linker["evidence"]["by"] == "triton"
    assert linker["evidence"]["argv"][0] == str(node.bindir / "gcc")
    assert by_id["python_headers_missing"]["status"] == "pass"
    assert by_id["libc_headers_missing"]["status"] == "pass"


def test_without_triton_nothing_is_compiled(tmp_path: Path) -> None:
    # The toolchain checks are not evaluated where Triton is not installed: no test compile.
    node = make_node(tmp_path / "node", triton=None)
    log = logging_gcc(node)
    _, doc, _ = run_probe(node)
    assert runs(log) == []
    linker = checks(doc)["no_linker"]
    assert (linker["status"], linker["summary"]) == (
        "skip", "not evaluated: Triton is not installed")


def test_a_triton_build_that_fails_before_the_compiler_leaves_the_test_compile_to_the_probe(
        tmp_path: Path) -> None:
    # Triton raises before it compiles (its own error text): no build proved the toolchain, so
    # the probe compiles its own test file, and the toolchain checks read it.
    node = make_node(tmp_path / "node", triton_error="0 active drivers ([]). There should "
                     "only be one.")
    log = logging_gcc(node)
    _, doc, _ = run_probe(node)
    assert [line for line in runs(log) if "fleetcheck_cc.c" in line]
    linker = checks(doc)["no_linker"]
    assert (linker["status"], linker["evidence"]["by"]) == ("pass", "probe")
    assert linker["summary"] == (
        f"compiled and linked a Python extension with {node.bindir / 'gcc'}")


def test_a_failed_triton_build_is_diagnosed_by_the_probes_own_compile(tmp_path: Path) -> None:
    # Python.h is not found: Triton's build fails, and the probe's own compile says why.
    node = make_node(tmp_path / "node", python_headers=False)
    _, doc, _ = run_probe(node)
    assert (doc["triton"]["verdict"], doc["triton"]["cause"]) == (
        "cpu-fallback", "python_headers_missing")
    headers = checks(doc)["python_headers_missing"]
    assert headers["status"] == "fail"
    assert headers["evidence"]["by"] == "probe"
    assert "fleetcheck_cc.c" in " ".join(headers["evidence"]["argv"])


def test_a_stack_that_used_the_deadline_leaves_the_compile_untried(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", torch_import_sleep=60)
    log = logging_gcc(node)
    _, doc, _ = run_probe(node, "--deadline", "3")
    assert runs(log) == []
    linker = checks(doc)["no_linker"]
    assert linker["status"] == "skip"
    assert linker["summary"] == ("not tested: the workload's stack left too little of the "
                                 "deadline (ld: %s)" % (node.bindir / "ld"))
    assert checks(doc)["no_c_compiler"]["status"] == "pass"
