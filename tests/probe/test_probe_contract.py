"""The probe's contract: Python 3.8 syntax, stdlib only, one JSON, bounded time, no leftovers."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.checks import CHECKS
from fleetcheck.probe import probe as probe_module
from fleetcheck.probe import probe_argv, probe_source
from fleetcheck.probe.parts import catalogue
from tests.nodeenv import make_node, run_probe

PY38 = Path.home() / ".pyenv/versions/3.8.18/bin/python3"
STDLIB = set(sys.stdlib_module_names)


def test_parses_as_python_38() -> None:
    ast.parse(probe_source(), feature_version=(3, 8))


def _vermin(path: Path) -> subprocess.CompletedProcess[str]:
    """vermin's verdict on `path` against Python 3.8 (exit 0: nothing newer is used)."""
    return subprocess.run([sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())",
                           "-t=3.8-", "--violations", "--no-tips", "-q", str(path)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("vermin") is None,
                    reason="vermin not installed (the dev extra has it)")
def test_needs_nothing_newer_than_python_38(tmp_path: Path) -> None:
    # Syntax alone (above) misses library calls: str.removeprefix, math.lcm, zoneinfo...
    # vermin knows the version each appeared in, whatever interpreter runs the tests.
    done = _vermin(Path(probe_module.__file__))
    assert done.returncode == 0, done.stdout + done.stderr
    newer = tmp_path / "newer.py"
    newer.write_text("import math\nprint(math.lcm(2, 3))\n")
    caught = _vermin(newer)
    assert caught.returncode != 0 and "math.lcm" in caught.stdout, caught.stdout


def test_imports_only_the_standard_library() -> None:
    tree = ast.parse(probe_source())
    top = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
           for alias in node.names}
    top |= {node.module.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module}
    assert top <= STDLIB, top - STDLIB


def test_check_ids_match_the_catalogue_in_causal_order() -> None:
    assert list(probe_module.CHECK_IDS) == [info.id for info in CHECKS]
    # Every check is a cause; the causes only a message, an errno, an object or a limit names
    # come after them.
    assert set(probe_module.CAUSE_LABELS) >= {info.id for info in CHECKS} - {"gpu_present"}
    assert [c.id for c in probe_module.CAUSES] == [c.id for c in catalogue.CAUSES]
    assert probe_module.CUDA_ONLY == {info.id for info in CHECKS if info.vendor == "nvidia"}
    assert probe_module.HIP_ONLY == {info.id for info in CHECKS if info.vendor == "amd"}


def test_probe_source_is_the_file_and_argv() -> None:
    assert probe_source() == Path(probe_module.__file__).read_text()
    assert probe_argv("python3", deep=False, deadline=50) == ["python3", "-", "--deadline", "50"]
    assert probe_argv("/usr/bin/python3", deep=True, deadline=12.5,
                      workload_python="/venv/bin/python3") == [
        "/usr/bin/python3", "-", "--deadline", "12.5", "--deep", "--python", "/venv/bin/python3"]


def test_isolated_mode_gives_the_same_verdict(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    rc, doc, stderr = run_probe(node, isolated=True)
    assert (rc, doc["status"], doc["triton"]["verdict"], stderr) == (0, "ok", "gpu", "")
    # Started again lean on a GPU node, the interpreter keeps the flags it was given.
    assert doc["facts"]["probe_cost"]["restarted_lean"] is True
    assert doc["facts"]["probe_python"]["isolated"] is True
    rc, doc, stderr = run_probe(node)
    assert (rc, stderr, doc["facts"]["probe_python"]["isolated"]) == (0, "", False)


def test_a_node_without_a_gpu_is_probed_without_a_restart(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", gpu=False)
    _rc, doc, stderr = run_probe(node)
    assert stderr == ""
    assert doc["facts"]["probe_cost"]["restarted_lean"] is False
    assert doc["facts"]["probe_cost"]["helpers"] == ["stack"]


@pytest.mark.skipif(not PY38.exists(), reason="pyenv Python 3.8 not installed")
def test_runs_under_python_38(tmp_path: Path) -> None:
    # Triton 3.9's real backends need Python >= 3.10: the stub Triton's own driver alone.
    node = make_node(tmp_path / "node", compiler=False, triton_backends=False)
    rc, doc, stderr = run_probe(node, isolated=True, python=str(PY38))
    assert (rc, doc["triton"]["verdict"], doc["triton"]["cause"], stderr) == (
        1, "cpu-fallback", "no_c_compiler", "")
    assert doc["facts"]["python"]["version"].startswith("3.8.")
    assert "python3.8-dev" in doc["triton"]["fix"]


@pytest.mark.skipif(not PY38.exists(), reason="pyenv Python 3.8 not installed")
def test_workload_python_option(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", compiler=False, triton_backends=False)
    rc, doc, _ = run_probe(node, "--python", str(PY38))
    assert doc["facts"]["python"] == {"executable": str(PY38), "version": "3.8.18"}
    assert doc["facts"]["probe_python"]["executable"] == node.python
    assert (rc, doc["triton"]["cause"]) == (1, "no_c_compiler")
    assert doc["triton"]["fix"] == (
        "no C compiler: apt-get install -y gcc libc6-dev python3.8-dev, or set CC")


def _listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize(("kwargs", "status"), [({}, "ok"),
                                               ({"compiler": False, "warm_cache": True}, "fail")],
                         ids=["healthy", "warm-cache"])
def test_leaves_nothing_behind(tmp_path: Path, kwargs: dict[str, bool], status: str) -> None:
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    node = make_node(tmp_path / "node", env={"TMPDIR": str(tmpdir)}, **kwargs)
    home_before = _listing(node.home)
    site_before = _listing(node.site)
    _, doc, _ = run_probe(node, "--deep")
    assert doc["status"] == status
    assert _listing(tmpdir) == []
    assert _listing(node.home) == home_before
    assert _listing(node.site) == site_before  # no __pycache__ written into the workload's venv


def test_deadline_bounds_a_hanging_torch_import(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", torch_import_sleep=60)
    rc, doc, _ = run_probe(node, "--deadline", "3")
    by_id = {c["id"]: c for c in doc["checks"]}
    assert (rc, doc["status"], doc["triton"]["verdict"]) == (3, "error", "unknown")
    assert by_id["torch_cuda"]["status"] == "error"
    assert by_id["torch_cuda"]["summary"] == (
        "timed out before import torch finished (deadline 3.0 s)")
    assert by_id["triton_target"]["status"] == "error"
    assert by_id["no_c_compiler"]["status"] == "pass"  # the static checks still answered
    assert doc["duration_s"] < 60


def test_bad_usage_is_still_one_json_document(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node")
    rc, doc, stderr = run_probe(node, "--bogus")
    assert (rc, doc["status"], doc["triton"]["verdict"], stderr) == (3, "error", "unknown", "")
    assert doc["reason"] == "probe error: ValueError: unknown argument '--bogus'"
    assert {c["status"] for c in doc["checks"]} == {"error"}
    assert len(doc["checks"]) == len(CHECKS)


def test_strings_are_bounded(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", triton_error="x" * 20000)
    _, doc, _ = run_probe(node)
    target = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert len(target["evidence"]["error"]) <= 4096
    assert len(target["summary"]) <= 400
    assert len(json.dumps(doc)) < 64 * 1024


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia"),
                    reason="this machine has an NVIDIA driver")
def test_this_machine_has_no_gpu() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETCHECK_")}
    done = subprocess.run([sys.executable, "-I", "-"], input=probe_source().encode(), env=env,
                          capture_output=True, timeout=60, check=False)
    doc = json.loads(done.stdout)
    assert (done.returncode, doc["status"], doc["triton"]) == (
        0, "warn", {"verdict": "no-gpu", "backend": None, "cause": None, "fix": ""})
    assert doc["reason"] == "no NVIDIA GPU on this node"
    assert doc["facts"]["gpus"] == []
    assert doc["facts"]["python"]["executable"] == sys.executable


def test_deep_runs_the_kernel_on_every_gpu(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", gpus=4, gpu_name="NVIDIA B200", compute_capability="10.0")
    rc, doc, _ = run_probe(node, "--deep")
    kernel = {c["id"]: c for c in doc["checks"]}["triton_kernel"]
    assert (rc, doc["triton"]["verdict"], kernel["status"]) == (0, "gpu", "pass")
    assert kernel["summary"] == "JIT kernel verified on 4 GPU(s) in a fresh cache"
    assert [d["index"] for d in kernel["evidence"]["devices"]] == [0, 1, 2, 3]


def test_deep_fails_on_the_one_gpu_that_cannot_run_the_kernel(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", gpus=8, broken_gpu=5)
    rc, doc, _ = run_probe(node, "--deep")
    kernel = {c["id"]: c for c in doc["checks"]}["triton_kernel"]
    assert (rc, doc["status"], kernel["status"]) == (1, "fail", "fail")
    assert kernel["summary"] == ("kernel failed on GPU 5: RuntimeError: CUDA error: "
                                 "uncorrectable ECC error encountered")
    assert [d["ok"] for d in kernel["evidence"]["devices"]] == [True] * 5 + [False] + [True] * 2


def test_deep_kernel_keeps_its_cache_dir_until_it_is_done(tmp_path: Path) -> None:
    """The --deep kernel builds and loads its launcher in a throw-away dir of the workload's
    cache; the stack, done long before a slow kernel, must not have it removed under the
    kernel (before, a kernel still building once the stack was done failed with dlopen's
    "No such file": a false cpu-fallback, seen on an H100). Nothing stays once it is done."""
    node = make_node(tmp_path / "node", kernel_sleep=3.0)
    cache = node.home / ".triton" / "cache"
    before = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []
    rc, doc, _ = run_probe(node, "--deep")
    kernel = {c["id"]: c for c in doc["checks"]}["triton_kernel"]
    assert (rc, doc["triton"]["verdict"], kernel["status"]) == (0, "gpu", "pass"), kernel
    assert (sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []) == before
