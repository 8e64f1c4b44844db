"""The version matrix: the probe against every Triton release's own code, healthy and broken.

Each release of tests/releases.py (Triton 2.1 to 3.6 and the newest, their real Python files,
driver sources and headers, fetched by the test set-up) is installed as the `triton` of fake
nodes (tests/nodeenv.py: the GPU, its driver and torch stubbed; real gcc). On each node the
workload's first step with Triton is run by the release's own code beside the probe (TRUTH in
tests/releases.py: 3.x's get_current_target(), 2.x's driver.utils), and the probe must say
what that code did:

- it succeeded: verdict gpu, on the backend the release chose;
- it failed: verdict cpu-fallback, with the cause its error names (`EXPECTED`, read from the
  release's own error text and type, whatever the case meant to break);
- it succeeded on a warm cache only (the same step in an empty cache fails in the compiler,
  as a new kernel's launcher would): verdict gpu, cause stale_cache_masks_compiler;
- on a healthy warm cache the toolchain's proof is the release's own build of its driver
  module's skeleton (the same compiler, headers, flags and link; `triton_target`'s evidence
  says `skeleton`), and the verdict is gpu.

The cases: a healthy node; no C compiler (an empty PATH but for binutils, no CC); CC naming no
file; libcuda.so.1 missing from the linker cache; no Python headers; a warm cache hiding a
removed compiler; the NVIDIA backend's folder removed (3.x). On AMD (3.0-3.5, the AMD backend
of the same wheels): healthy with torch in the site-packages of the workload's venv, with no
libamdhip64 anywhere (torch built without it, no ROCm), and torch plus Triton in the user site
(pip install --user) with no ROCm on the system. Each case is a subtest of its release's test:
one release's nodes are built in one process, the healthy node's warm cache reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import NodeEnv
from tests.releases import (
    RELEASES,
    MissingRelease,
    Release,
    Truth,
    amd_driver,
    make_release_node,
    probe,
    truth,
)

#: The cause a failure of the release's own code names: (regex on its "Type: message", cause).
EXPECTED = (
    (r"Failed to find C compiler", "no_c_compiler"),
    (r"libcuda\.so cannot found", "libcuda_not_in_ldcache"),
    (r"cannot locate libamdhip64\.so", "libamdhip64_not_found"),
    (r"TRITON_LIBHIP_PATH .* does not point to a valid", "libhip_path_invalid"),
    # 3.4+ imports each backend its entry points name; 3.0-3.3 list backends/ (no NVIDIA
    # backend left: no driver active on a node whose GPU and torch are healthy).
    (r"No module named 'triton|\b0 active drivers", "triton_install_broken"),
)


def expected_cause(t: Truth, env: dict[str, str]) -> str:
    """The cause the release's failure names (EXPECTED; a compiler the release could not run
    where CC points is CC's; a compiler run that failed on Python.h is the headers')."""
    if t.type in ("FileNotFoundError", "PermissionError") and t.filename and \
            t.filename == env.get("CC"):
        return "cc_env_invalid"
    if t.type == "CalledProcessError" and re.search(r"Python\.h: No such file", t.stderr):
        return "python_headers_missing"
    for pattern, cause in EXPECTED:
        if re.search(pattern, t.error):
            return cause
    raise AssertionError(f"no cause for the release's own failure: {t.error}\n{t.stderr}")


def judge(rel: Release, case: str, doc: dict[str, Any], t: Truth, env: dict[str, str],
          masked: Truth | None = None) -> None:
    """The probe's verdict and cause against what the release's code did."""
    triton = doc["triton"]
    said = f"OK ({t.backend})" if t.ok else f"FAIL at {t.step}: {t.error[:400]}"
    where = (f"{rel}, {case}: the release's own code: {said}; probe: {triton['verdict']} "
             f"(cause {triton['cause']}, backend {triton['backend']}): {doc['reason']}")
    if t.ok and masked is not None and not masked.ok and masked.compiler:
        assert (triton["verdict"], triton["cause"]) == ("gpu", "stale_cache_masks_compiler"), \
            where + f"; in an empty cache: {masked.error[:300]}"
    elif t.ok:
        assert triton["verdict"] == "gpu", where
        assert triton["backend"] == t.backend, where
    else:
        want = expected_cause(t, env)
        assert (triton["verdict"], triton["cause"]) == ("cpu-fallback", want), \
            where + f"; expected cpu-fallback ({want})"
        assert triton["fix"], where


def release_files(node: NodeEnv) -> dict[str, str]:
    """Every file of the node's Triton and its content's digest."""
    root = node.site / "triton"
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def warm_probe(rel: Release, case: str, node: NodeEnv, t: Truth) -> None:
    """A warm healthy node: the workload's start loaded its entry, and the toolchain is
    proven by the release's own build of its driver module's skeleton, not by compiling the
    whole module again (triton_target's evidence says `skeleton`); the verdict the same, and
    the release's files untouched (3.9 builds its installed driver.c in place: the skeleton
    is a file of the probe's own)."""
    before = release_files(node)
    doc = probe(node)
    assert release_files(node) == before, f"{rel}, {case}: the probe changed Triton's files"
    judge(rel, case, doc, t, node.env)
    target = next(c for c in doc["checks"] if c["id"] == "triton_target")
    assert (target["status"], target["evidence"]["cache"]) == ("pass", "skeleton"), \
        f"{rel}, {case}: {target}"


def _needs(rel: Release) -> None:
    try:
        rel.check()
    except MissingRelease as e:
        pytest.fail(str(e))


#: FLEETCHECK_RELEASE_MATRIX=full runs every case on every release (92 cases, about 105 s of
#: CPU: a probe and the release's own code, 0.7-1.5 s a case); unset, or "cover", the suite's
#: run (32 cases, about 40 s of CPU):
#: every release's healthy case (its own driver, build and cache code, cold), and one more case
#: per release in turn (ROTATION), so that each case runs on releases of both layouts (2.x-3.3,
#: 3.4+) and every release on one failure.
MATRIX = os.environ.get("FLEETCHECK_RELEASE_MATRIX") or "cover"
if MATRIX not in ("cover", "full"):
    raise ValueError(f"FLEETCHECK_RELEASE_MATRIX={MATRIX!r}: 'cover' or 'full'")

#: The NVIDIA cases after the healthy one, in the order the cover hands them to the releases
#: (the i-th release gets ROTATION[i % 6], or the next one it has: with Triton 2.1-3.6 and
#: 3.9, each case on a release of 2.x or 3.0-3.2 and, but the last, on one of 3.3 or later).
ROTATION = ("no-compiler", "stale-cache-masks-compiler", "cc-invalid",
            "libcuda-not-in-ldcache", "backend-removed", "python-headers-missing")


def nvidia_cases(rel: Release) -> list[str]:
    """The cases the matrix runs on this release, the healthy one first."""
    # The NVIDIA backend's folder (3.x); 2.x's drivers are in runtime/driver.py.
    has_backends = (rel.fetched / "triton/backends/nvidia").is_dir()
    cases = [c for c in ROTATION if c != "backend-removed" or has_backends]
    if MATRIX == "full":
        return ["healthy", *cases]
    index = RELEASES.index(rel)
    turn = [ROTATION[(index + k) % len(ROTATION)] for k in range(len(ROTATION))]
    return ["healthy", next(c for c in turn if c in cases)]


def nvidia_node(root: Path, rel: Release, case: str) -> NodeEnv:
    """A node of the release broken as `case` says (make_node's options)."""
    broken: dict[str, dict[str, object]] = {
        "no-compiler": {"compiler": False},  # PATH: binutils only, no CC
        "cc-invalid": {"cc_env": str(root / "no-such-cc")},
        "libcuda-not-in-ldcache": {"ldcache_has_libcuda": False},
        "python-headers-missing": {"python_headers": False},
    }
    node = make_release_node(root, rel, **broken.get(case, {}))  # type: ignore[arg-type]
    if case == "backend-removed":
        shutil.rmtree(node.site / "triton/backends/nvidia")
    return node


@pytest.mark.parametrize("rel", RELEASES, ids=lambda r: r.version)
def test_the_probe_says_what_each_release_does_on_nvidia(
        tmp_path: Path, rel: Release, subtests: pytest.Subtests) -> None:
    _needs(rel)
    cases = nvidia_cases(rel)
    healthy = make_release_node(tmp_path / "healthy", rel)
    with subtests.test(case="healthy"):
        doc = probe(healthy)
        t = truth(healthy)  # the workload's first run: its cache is warm from now on
        judge(rel, "healthy", doc, t, healthy.env)
        assert t.ok, f"{rel}: a healthy node fails in the release's own code: {t.error}"
    with subtests.test(case="healthy-warm"):
        warm_probe(rel, "healthy-warm", healthy, t)
    for case in cases[1:]:
        with subtests.test(case=case):
            if case == "stale-cache-masks-compiler":
                node = healthy
                (node.bindir / "gcc").unlink()  # the compiler removed since that run
                masked = truth(node, {"TRITON_CACHE_DIR": str(node.root / "empty-cache")})
            else:
                node, masked = nvidia_node(tmp_path / case, rel, case), None
            doc = probe(node)
            judge(rel, case, doc, truth(node), node.env, masked=masked)


ROCM = tuple(r for r in RELEASES if (3, 0) <= r.key <= (3, 5))
#: The AMD cases, each on nodes of its own: make_release_node's options.
ROCM_CASES: dict[str, dict[str, object]] = {
    "user-site-no-rocm": {"site": "user"},
    "healthy-venv": {"site": "venv"},
    "no-libamdhip64": {"site": "venv", "mode": "no-libhip"},
}


def rocm_cases(rel: Release) -> list[str]:
    """Every release: torch and Triton in the user site (the issue's failure on 3.0, a
    healthy node where the release searches the user site); a healthy venv where that failed
    (each release shows one healthy node: `test_...on_rocm` adds it); the cover gives the
    missing libamdhip64 to every third release."""
    if MATRIX == "full":
        return list(ROCM_CASES)
    return ["user-site-no-rocm", *(["no-libamdhip64"] if ROCM.index(rel) % 3 == 2 else [])]


@pytest.mark.parametrize("rel", ROCM, ids=lambda r: r.version)
def test_the_probe_says_what_each_release_does_on_rocm(
        tmp_path: Path, rel: Release, subtests: pytest.Subtests) -> None:
    _needs(rel)
    assert amd_driver(rel) is not None, f"{rel}'s wheel ships no AMD backend"
    cases, healthy = rocm_cases(rel), False
    while cases:
        case = cases.pop(0)
        with subtests.test(case=case):
            node = make_release_node(tmp_path / case, rel, amd=True,
                                     **ROCM_CASES[case])  # type: ignore[arg-type]
            doc = probe(node)
            t = truth(node)
            healthy = healthy or (t.ok and case != "no-libamdhip64")
            if case == "healthy-venv":
                assert t.ok, f"{rel}: a healthy node fails in the release's own code: {t.error}"
            judge(rel, case, doc, t, node.env)
            if t.ok:  # warm now: the HIP driver module's skeleton proves the toolchain
                warm_probe(rel, case, node, t)
        if not cases and not healthy and case != "healthy-venv":
            cases.append("healthy-venv")
