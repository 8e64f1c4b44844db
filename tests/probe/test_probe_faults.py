"""The probe's own errors are the probe's: a fault injected into each place where the probe wraps,
replaces or instruments the workload's code is a record naming the probe's step, never a
workload verdict.

Each case takes the shipped probe and makes one of its own functions raise as its first
statement (the function a Triton the probe was not written for would break: a cache manager
with other arguments, a driver without the API the probe calls, an import layout it did not
expect). On a healthy node whose Triton builds with the newest release's own build and cache
code (tests/probe/workload_state.py), the verdict must never be cpu-fallback; where the probe
can prove the path without its instrumentation (the proof's cache manager, the compiler runs'
tracer), it must still be gpu, through the workload's own cache.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.contracts import validated_json
from tests.nodeenv import private_mount_prefix, run_probe
from tests.probe.workload_state import (
    WorkloadNode,
    snapshot,
    workload_base,  # noqa: F401  (a fixture)
    workload_node,
)

pytestmark = pytest.mark.subprocess

PROBE = Path(__file__).resolve().parents[2] / "fleetcheck" / "probe" / "probe.py"

#: (the def line of a probe function, as shipped; whether the probe proves the path without
#: it, so that the verdict stays gpu).
POINTS: tuple[tuple[str, bool], ...] = (
    # The proof's cache manager over the workload's real entries (scripts/workload.py).
    ("def __init__(self, *args, **kwargs):", True),
    ("def put(self, data, filename, binary=True):", True),
    ("def has_file(self, filename):", True),
    ("def swap_manager(cache_module, old, new):", False),
    # The compiler runs' tracer (subprocess.check_call, Triton's compiler call).
    ("def check_call(*popenargs, **kwargs):", True),
    # The release's driver API, its reset, the reads beside the build.
    ("def current_target(triton):", False),
    ("def reset_driver(triton):", False),
    ("def backend_report(triton):", True),
    ("def selection(found):", True),
    ("def knob_report(triton, env):", True),
    ("def audit_entries(cache, rebuilds, skip=\".fleetcheck-probe\", budget=3.0):", True),
    ("def mirror_cache(cache):", True),
    # This round's steps: the skeleton proof on a warm cache (the real module is built
    # instead), inductor's config read from its source (imported instead), the thread that
    # reads the GPU state and the driver layer (helpers of the probe's own instead).
    ("def skeleton_proof(triton, where):", True),
    ("def source_settings(path, wanted):", True),
    ("def read_driver():", True),
)


def injected(source: str, def_line: str) -> str:
    """`source` with the function at `def_line` raising as its first statement."""
    lines = source.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.strip() == def_line]
    assert len(at) == 1, f"{def_line!r} is not one line of the shipped probe"
    indent = re.match(r"\s*", lines[at[0]]).group(0)  # type: ignore[union-attr]
    name = def_line.split("(")[0].split()[-1]
    lines.insert(at[0] + 1, f"{indent}    raise RuntimeError('injected fault in the probe: "
                            f"{name}')\n")
    return "".join(lines)


def probe_with(state: WorkloadNode, source: str) -> dict:
    done = subprocess.run([*state.prefix, state.node.python, "-"], input=source.encode(),
                          env=state.node.env, capture_output=True, timeout=180,
                          cwd=state.node.root)
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, done.stdout.decode()[:2000] + done.stderr.decode()[:2000]
    return validated_json(lines[0], "probe")


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_fault_in_the_probes_own_step_is_never_a_workload_verdict(
        workload_base: Path, warm: bool) -> None:  # noqa: F811
    state = workload_node(workload_base)
    if warm:
        assert state.warm() == (True, "OK")
    source = PROBE.read_text()
    before = snapshot(state.node.home, state.tmp)
    said = []
    # A cold cache meets what a warm one does but the build's own writes (the manager's put
    # and the compiler's runs): those points are made there too.
    cold = {"def __init__(self, *args, **kwargs):", "def put(self, data, filename, binary=True):",
            "def has_file(self, filename):", "def check_call(*popenargs, **kwargs):",
            "def current_target(triton):", "def read_driver():"}
    for def_line, proved in POINTS:
        if not warm and def_line not in cold:
            continue
        doc = probe_with(state, injected(source, def_line))
        triton = doc["triton"]
        where = f"{def_line}: {triton['verdict']} ({triton['cause']}): {doc['reason']}"
        said.append(where)
        assert triton["verdict"] != "cpu-fallback", where
        assert "injected fault" not in (triton["fix"] or ""), where
        if proved:
            assert triton["verdict"] == "gpu", where
        if triton["verdict"] == "gpu":
            # Nor a cause of the workload's beside it (before, the tracer's fault in the fresh
            # cache was a warm cache hiding a broken toolchain: "install the toolchain").
            assert triton["cause"] is None, where
        else:
            assert triton["verdict"] in ("gpu", "unknown"), where
        if triton["verdict"] == "unknown":
            # The record names the probe's step, not a cause of the workload's.
            assert "the probe's own step" in json.dumps(doc["checks"]), where
        assert snapshot(state.node.home, state.tmp) == before, where
    # The same node, the shipped probe: gpu through the workload's own state.
    assert probe_with(state, source)["triton"]["verdict"] == "gpu", said


def test_a_cache_manager_of_another_shape_is_proved_without_the_probes_manager(
        workload_base: Path) -> None:  # noqa: F811
    """A Triton whose FileCacheManager differs (a fork, a patched build, a future release):
    keyword-only flags and an argument of its own, and its path helper renamed. The probe's
    manager passes the arguments through; where its own code still breaks (the helper it
    calls is gone), the workload's build is proved again without it, in a throw-away
    subdirectory of its cache, and the verdict is the workload's: gpu."""
    state = workload_node(workload_base)
    cache_py = state.node.site / "triton" / "runtime" / "cache.py"
    text = cache_py.read_text()
    patched = re.sub(r"def __init__\(self, key(: str)?, override(: bool)? ?= ?False, "
                     r"dump(: bool)? ?= ?False\)",
                     "def __init__(self, key, *, override=False, dump=False, site=None)",
                     text, count=1).replace("_make_path", "_path_for")
    assert "site=None" in patched and "_path_for" in patched, "runtime/cache.py moved"
    cache_py.write_text(patched)
    before = snapshot(state.node.home, state.tmp)
    doc = probe_with(state, PROBE.read_text())
    assert doc["triton"]["verdict"] == "gpu", doc["reason"]
    assert snapshot(state.node.home, state.tmp) == before
    own = next(c for c in doc["checks"] if c["id"] == "triton_own_path")
    assert own["status"] == "pass", own["summary"]
    assert own["evidence"]["probe_cache"] != str(state.cache)  # proved in a subdirectory


def test_the_probes_own_kernel_builds_where_the_workloads_would(
        workload_base: Path) -> None:  # noqa: F811
    """TMPDIR on a noexec mount: the workload builds and loads its kernels from its own cache,
    which allows exec; so must the probe's --deep kernel and its fresh-cache attempt (before,
    both built in the probe's temp dir under TMPDIR and could not map their modules:
    cpu-fallback, path_noexec)."""
    state = workload_node(workload_base)
    assert state.warm() == (True, "OK")  # a warm cache: the fresh attempt runs too
    prefix = private_mount_prefix(
        state.tmp, 'PATH=/usr/sbin:/usr/bin:/sbin:/bin; mount --bind "$0" "$0" && '
        'mount -o remount,bind,noexec "$0" && shift; exec "$@"', "--")
    if prefix is None:
        pytest.skip("cannot make a private mount namespace here (unshare -m)")
    assert state.truth(prefix=tuple(prefix)) == (True, "OK")
    before = snapshot(state.node.home, state.tmp)
    _, doc, _ = run_probe(state.node, "--deep", prefix=[*prefix, *state.prefix], timeout=180)
    assert doc["triton"]["verdict"] == "gpu", doc["reason"]
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["triton_kernel"]["status"] == "pass", by_id["triton_kernel"]["summary"]
    assert by_id["triton_target"]["status"] == "pass", by_id["triton_target"]["summary"]
    assert snapshot(state.node.home, state.tmp) == before
