"""The suite on pytest-xdist workers (tests/conftest.py): its groups, its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import XDIST_GROUPS, xdist_group
from tests.reliability.conftest import Figures, merged_figures

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.subprocess
def test_a_group_runs_on_one_worker() -> None:
    """The own-process group's tests (here tests/bench/test_bench_helpers.py) on one worker,
    each test of no group on whichever is free: pytest-xdist's own `xdist_group` marks are
    lost on pytest 9.2 (the tests are spread), the node ids the scheduler reads are not."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-v",
         "tests/bench/test_bench_helpers.py", "tests/test_outbound.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+)", done.stdout,
                                     re.MULTILINE):
        workers[nodeid.split("::")[0]].add(worker)
    assert set(workers) == {"tests/bench/test_bench_helpers.py", "tests/test_outbound.py"}
    assert len(workers["tests/bench/test_bench_helpers.py"]) == 1, done.stdout


def test_the_groups_by_node_id() -> None:
    assert xdist_group("tests/runtimes/test_real_fleet.py::test_x[pve1/301]") == "own-process"
    assert xdist_group("tests/fix/test_fix_fleet.py::"
                       "test_an_interrupted_apply_still_writes_a_complete_record") == "own-process"
    assert xdist_group("tests/fix/test_fix_fleet.py::test_dry_run_prints_the_plan") is None
    assert xdist_group("tests/integrations/test_slurm.py::test_a") == "slurm"
    assert xdist_group("tests/integrations/test_slurm_fleet.py::test_a") == "slurm-fleet"
    assert xdist_group("tests/test_outbound.py::test_allowed[10%-4-1]") is None
    prefixes = [prefix for group in XDIST_GROUPS.values() for prefix in group]
    assert len(prefixes) == len(set(prefixes))


def test_the_workers_figures_add_up_to_the_runs() -> None:
    """Each worker's reliability figures reach the controller as JSON; merged, they print as
    one process's figures of the same tests would."""
    first, second, whole = Figures(), Figures(), Figures()
    for figures, test in ((first, "a"), (whole, "a")):
        figures.current = test
        with figures.fault("host killed"):
            figures.tried("inventory loader", 3)
        figures.injection("$(id)", ran=False)
        figures.processes(["123 sleep"])
    for figures, test in ((second, "b"), (whole, "b")):
        figures.current = test
        figures.tried("inventory loader", 2)
        figures.secrets_scanned([], artefacts=4)
        figures.measure("peak RSS", "95 MiB")
        figures.processes(["456 python3"])
    second.xfailed.add("b")
    whole.xfailed.add("b")
    merged = merged_figures([first.state(), second.state()])
    assert merged.lines() == whole.lines()
    assert "leftover node processes: 1 (sweeps: 2; 1 more in known bugs (xfail))" in merged.lines()
