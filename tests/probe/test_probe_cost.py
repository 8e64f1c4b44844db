"""What the probe costs a node, in processes and compiler runs: never more than today, unnoticed.

On a healthy node of the newest and the oldest Triton release (tests/releases.py: the release's
own driver, build and cache code over the stub GPU), cold (the workload's Triton cache empty)
and warm (after the workload's own first start): the compiler runs, counted by a gcc on the
node's PATH that logs each run before it execs the real one, and the helpers the probe starts,
as its document reports them (facts.probe_cost). A cold probe compiles the driver module once
(the workload's own build, which is also the toolchain's proof); a warm one compiles only the
module's skeleton, once. Timings live in the benchmarks (bench/probe_profile.py), never here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nodeenv import gcc_runs, logging_gcc
from tests.releases import RELEASES, MissingRelease, Release, make_release_node, probe, truth

#: The most the probe may start on a healthy NVIDIA node: its helpers (the stack in the
#: workload's interpreter, which also reads each GPU's state and the driver layer in a thread;
#: nvidia-smi; ldconfig -p).
MAX_HELPERS = 3
#: The C compiler runs: one on a cold cache (the module), one on a warm cache (its skeleton).
MAX_COMPILER_RUNS = {"cold": 1, "warm": 1}

@pytest.mark.parametrize("rel", [RELEASES[0], RELEASES[-1]], ids=lambda r: r.version)
def test_the_probe_starts_no_more_than_it_did(tmp_path: Path, rel: Release) -> None:
    try:
        rel.check()
    except MissingRelease as e:
        pytest.fail(str(e))
    node = make_release_node(tmp_path / "node", rel)
    log = logging_gcc(node)
    for state in ("cold", "warm"):
        doc = probe(node)
        runs = gcc_runs(log)
        log.unlink(missing_ok=True)
        cost = doc["facts"]["probe_cost"]  # type: ignore[index]
        where = f"{rel}, {state} cache: {cost}; gcc runs: {runs}"
        assert doc["triton"]["verdict"] == "gpu", where  # type: ignore[index]
        assert len(runs) <= MAX_COMPILER_RUNS[state], where
        assert cost["compiler_runs"] == len(runs), where
        assert len(cost["helpers"]) <= MAX_HELPERS, where
        assert cost["helpers"].count("stack") == 1, where
        # The probe's interpreter started again with its code loaded, not compiled (an exec:
        # no process more), before anything else ran.
        assert cost["restarted_lean"] is True, where
        if state == "cold":
            t = truth(node)  # the workload's own first start warms its cache
            assert t.ok, t.error
            log.unlink(missing_ok=True)
