"""The probe's HIP search against the real one: Triton 3.9's own `_get_path_to_hip_runtime_dylib`.

The function is taken from the real wheel's `triton/backends/amd/driver.py` (extracted once by
scripts/fetch_test_wheels.py into .test-wheels/triton-3.9.0) and run, as its source says, on the
fake AMD nodes of tests/nodeenv.py. Only what needs Triton's C++ extension is stood in for:
`knobs.amd.libhip_path` (TRITON_LIBHIP_PATH, as knobs reads it) and
`amd.find_loaded_library` (dl_iterate_phdr in C++: the same answer from /proc/self/maps); and
its literal "/sbin/ldconfig" is the fake node's (under FLEETCHECK_SYSROOT). It runs after
`import torch`, as in a workload (HIPDriver.is_active() imports torch first). The probe must
pick the same library, or fail with the same text.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import GCC, build_libamdhip64, make_amd_node, python_include, run_probe

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / ".test-wheels" / "triton-3.9.0" / "triton" / "backends" / "amd" / "driver.py"

pytestmark = pytest.mark.timeout(120)

RUNNER = r'''
import functools, json, os, subprocess as _subprocess, sys, types
from pathlib import Path
import torch  # HIPDriver.is_active() imports torch before Triton looks for the library
SYSROOT = os.environ["FLEETCHECK_SYSROOT"]
class subprocess:
    CalledProcessError = _subprocess.CalledProcessError
    @staticmethod
    def check_output(argv, *args, **kwargs):
        if argv and argv[0] == "/sbin/ldconfig":
            argv = [SYSROOT.rstrip("/") + "/sbin/ldconfig"] + list(argv[1:])
        return _subprocess.check_output(argv, *args, **kwargs)
def _find_already_mmapped_dylib_on_linux(lib_name):
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith(lib_name):
                return path
    return None
knobs = types.SimpleNamespace(amd=types.SimpleNamespace(
    libhip_path=os.environ.get("TRITON_LIBHIP_PATH") or None))
__file__ = sys.argv[1]
exec(compile(sys.argv[2], "driver.py", "exec"))
try:
    print(json.dumps({"path": _get_path_to_hip_runtime_dylib()}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
'''


def real_search(node: Any) -> dict[str, str]:
    """What Triton 3.9's own function answers on the node, in the workload's interpreter."""
    tree = ast.parse(DRIVER.read_text(encoding="utf-8"))
    [function] = [n for n in tree.body if isinstance(n, ast.FunctionDef)
                  and n.name == "_get_path_to_hip_runtime_dylib"]
    source = ast.get_source_segment(DRIVER.read_text(encoding="utf-8"), function)
    assert source is not None
    source = "@functools.lru_cache()\n" + source
    driver_file = node.site / "triton" / "backends" / "amd" / "driver.py"
    done = subprocess.run([node.python, "-c", RUNNER, str(driver_file), source], env=node.env,
                          capture_output=True, text=True, timeout=60, cwd=node.root)
    assert done.returncode == 0, done.stderr
    answer: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.fixture(autouse=True)
def _wheel() -> None:
    if not DRIVER.is_file():
        pytest.fail(f"{DRIVER.relative_to(ROOT)} missing: run scripts/fetch_test_wheels.py")


@pytest.mark.parametrize("mode", ["ok", "no-libhip", "libhip-path", "system-rocm"])
def test_the_probe_picks_what_triton_picks(tmp_path: Path, mode: str) -> None:
    node = make_amd_node(tmp_path / "node", mode=mode)
    real = real_search(node)
    _, doc, _ = run_probe(node)
    by_id = {check["id"]: check for check in doc["checks"]}
    if "error" in real:
        row = {"no-libhip": "libamdhip64_not_found", "libhip-path": "libhip_path_invalid"}[mode]
        assert by_id[row]["status"] == "fail"
        assert by_id[row]["evidence"]["expected_error"] == real["error"]
        assert doc["triton"]["cause"] == row
    else:
        found = doc["facts"]["amd"]["libamdhip64"]
        assert os.path.realpath(found) == os.path.realpath(real["path"])


def test_triton_s_own_texts_are_the_ones_the_probe_classifies(tmp_path: Path) -> None:
    """The errors of the real source, classified to their rows by the probe's patterns."""
    from fleetcheck.probe.parts.evaluation.classify import classify_error

    node = make_amd_node(tmp_path / "node", mode="no-libhip")
    assert classify_error(real_search(node)["error"]) == "libamdhip64_not_found"
    node = make_amd_node(tmp_path / "other", mode="libhip-path")
    assert classify_error(real_search(node)["error"]) == "libhip_path_invalid"
    # driver.c's own texts (initSymbolTable, checkDriverVersion), as its RuntimeError says them.
    text = re.sub(r'"\s*\n\s*"', "", (DRIVER.parent / "driver.c").read_text(encoding="utf-8"))
    for error, row in (("cannot open libamdhip64.so", "libamdhip64_not_found"),
                       ("libamdhip64 version %d.%d.%d is not supported! Required major "
                        "version is >=%d.", "libamdhip64_other_rocm")):
        assert error in text
        assert classify_error("RuntimeError: " + error.replace("%d", "5")) == row


def real_driver_c(tmp_path: Path, **stub: Any) -> dict[str, Any]:
    """Triton 3.9's driver.c compiled as compile_module_from_src compiles it, over a stub
    libamdhip64 built with the same bundled headers; its get_device_properties(0)."""
    include = DRIVER.parent / "include"
    options: dict[str, Any] = {"hip_version": "6.4.43482", "count_rc": 0, "count": 1,
                               "name": "AMD Instinct MI300X", "memory_mib": 196592}
    options.update(stub)
    lib = build_libamdhip64(tmp_path / "lib", hip_include=include, **options)
    source = (DRIVER.parent / "driver.c").read_text(encoding="utf-8")
    src = tmp_path / "main.c"
    src.write_text(source.replace("/*py_libhip_search_path*/", str(lib), 1))
    so = tmp_path / "hip_utils.so"
    subprocess.run([GCC, str(src), "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", str(so),
                    f"-I{include}", f"-I{python_include()}"], check=True,
                   stdout=subprocess.DEVNULL)
    script = ("import json, sys\nsys.path.insert(0, sys.argv[1])\ntry:\n"
              "    import hip_utils\n    print(json.dumps(hip_utils.get_device_properties(0)))\n"
              "except Exception as e:\n"
              "    print(json.dumps({'error': type(e).__name__ + ': ' + str(e)}))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_the_real_driver_c_runs_on_the_stub_libamdhip64(tmp_path: Path) -> None:
    """The stub's entry points are the ones driver.c resolves (hipGetProcAddress for each),
    and its device properties come through the real hipDeviceProp_t."""
    props = real_driver_c(tmp_path)
    assert (props["arch"], props["warpSize"], props["multiprocessor_count"]) == (
        "gfx942:sramecc+:xnack-", 64, 304)


def test_the_real_driver_c_s_errors_are_the_probe_s_rows(tmp_path: Path) -> None:
    from fleetcheck.probe.parts.evaluation.classify import classify_error

    old = real_driver_c(tmp_path / "old", hip_version="5.7.31921")
    assert old == {"error": "RuntimeError: libamdhip64 version 5.7.31921 is not supported! "
                            "Required major version is >=6."}
    assert classify_error(old["error"]) == "libamdhip64_other_rocm"
    none = real_driver_c(tmp_path / "none", count_rc=100)
    # gpuAssert()'s text, two spaces and its spelling included; the stub Triton says the same.
    assert none == {"error": "RuntimeError: Triton Error [HIP]:  Code: 100, Messsage: no "
                             "ROCm-capable device is detected"}
