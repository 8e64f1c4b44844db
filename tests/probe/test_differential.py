"""Differential: the probe's gpu against the workload's own Triton, over perturbed node states.

The node's Triton builds its driver module and launchers with the newest release's own
runtime/build.py and runtime/cache.py against the suite's driver stub (tests/nodeenv.py,
real_triton_build). For each generated state (tests/probe/perturb.py: owners, modes and links of
every component of the home, cache and temp paths; entries truncated, half-written, of another
type; file systems full, out of inodes, read-only, noexec in a private mount namespace; prlimit;
the environment; the compiler, the linker or the driver's libcuda.so.1 link removed), on a warm
or a cold cache, the workload's own start (TRUTH: get_current_target(), an earlier kernel's
launcher, a new one) is run as the workload user beside the probe. The probe's gpu must be the
workload's outcome (a toolchain failure the warm cache hides until a new kernel is gpu with the
cause stale_cache_masks_compiler, as fleetcheck words it), a cpu-fallback must name a cause with
a fix, and the probe must leave the home and temp dirs as it found them.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.probe.perturb import (
    COMPONENTS,
    ENTRY_CHANGES,
    ENVS,
    LIMITS,
    MOUNTS,
    PATH_CHANGES,
    TOOLS,
    Perturbation,
    applicable,
    apply,
    unshare_works,
)
from tests.probe.workload_state import (
    IS_ROOT,
    snapshot,
    workload_base,  # noqa: F401  (a fixture)
    workload_node,
)

_MOUNTS_OK = unshare_works()
PERTURBATIONS = (
    [Perturbation("path", change, component) for component in COMPONENTS
     for change in PATH_CHANGES + ENTRY_CHANGES]
    + [Perturbation("mount", change) for change in MOUNTS if _MOUNTS_OK]
    + [Perturbation("limit", change) for change in LIMITS]
    + [Perturbation("env", change) for change in ENVS]
    + [Perturbation("tool", change) for change in TOOLS])
#: Every state this machine can make: (warm cache, perturbation).
CASES = [(warm, p) for warm, p in itertools.product((True, False), PERTURBATIONS)
         if applicable(p, warm)]
_COUNTER = itertools.count()


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=st.sampled_from(CASES))
# The case (a job run once as root left root-only entries), and two of its class, always.
@example(case=(True, Perturbation("path", "foreign-0700", "driver-entry")))
@example(case=(True, Perturbation("path", "mode-000", "launcher-entry")))
@example(case=(True, Perturbation("path", "file", "driver-entry")))
# A noexec cache seen by the workload's own process (statvfs), not in the node's mountinfo.
@example(case=(False, Perturbation("mount", "noexec")))
def test_the_probes_gpu_is_the_workloads_own_outcome(
        workload_base: Path, case: tuple[bool, Perturbation]) -> None:  # noqa: F811
    warm, perturbation = case
    if not applicable(perturbation, warm) or (perturbation.kind == "mount" and not _MOUNTS_OK):
        return  # another user's entries, and mounts, need root to make
    name = f"node-{next(_COUNTER)}"
    state = workload_node(workload_base, name)
    try:
        if warm:
            assert state.warm() == (True, "OK")
        prefix = apply(state, perturbation)
        before = snapshot(state.node.home, state.tmp)
        doc = state.probe(prefix)
        assert snapshot(state.node.home, state.tmp) == before, perturbation
        ok, said = state.truth(prefix=prefix)
        masked = said.startswith("FAIL new-compiler")
        triton = doc["triton"]
        where = (f"{'warm' if warm else 'cold'} {perturbation}: workload {said}; probe "
                 f"{triton['verdict']} ({triton['cause']}): {doc['reason']}")
        assert (triton["verdict"] == "gpu") == (ok or masked), where
        if masked:
            assert triton["cause"] == "stale_cache_masks_compiler", where
        if triton["verdict"] != "gpu":
            assert triton["cause"] and triton["fix"], where
    finally:
        shutil.rmtree(workload_base / name, ignore_errors=True)


def test_the_generated_states_cover_every_kind() -> None:
    kinds = {p.kind for _, p in CASES}
    assert {"path", "limit", "env", "tool"} <= kinds
    assert {p.component for _, p in CASES if p.kind == "path"} == set(COMPONENTS)
    assert {p.change for _, p in CASES} >= set(ENTRY_CHANGES) | {"mode-000", "dangling-link"}
    assert ("mount" in kinds) == _MOUNTS_OK
    assert any(p.change.startswith("foreign") for _, p in CASES) == IS_ROOT
