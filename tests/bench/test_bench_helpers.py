"""Smoke tests of the benchmark's helpers: measurement of a process tree, medians, ratios."""

from __future__ import annotations

import sys

import pytest

from bench.contenders import Outcome
from bench.measure import Measurement, descendants, run_measured
from bench.report import Row, quick_line, table

# It measures this process's tree and the orphans it adopts (tests/conftest.py: on one
# worker, before the real fleet's processes are this process's children).
pytestmark = pytest.mark.own_process


def test_run_measured_counts_the_tree_and_its_own_memory() -> None:
    # A child that allocates ~64 MB and burns some CPU, started through a shell.
    script = "x = bytearray(64 * 1024 * 1024); sum(range(3_000_000)); print('done')"
    measured = run_measured(["sh", "-c", f'{sys.executable} -c "{script}"'], timeout=60)
    assert measured.returncode == 0
    assert measured.stdout == b"done\n"
    assert measured.cpu_s > 0.02
    assert 60 <= measured.peak_rss_mb < 200
    assert measured.wall_s >= measured.cpu_s * 0.5


def test_run_measured_small_command_is_not_charged_for_the_bench() -> None:
    measured = run_measured(["true"], timeout=30)
    assert measured.returncode == 0
    assert measured.peak_rss_mb < 20  # not the ~40 MB of the Python process that started it


def test_run_measured_kills_at_timeout() -> None:
    measured = run_measured(["sleep", "30"], timeout=0.5)
    assert measured.returncode != 0
    assert measured.wall_s < 10


def test_descendants_walks_the_tree() -> None:
    table_ = {2: (1, 0), 3: (2, 0), 4: (3, 0), 5: (1, 0), 6: (99, 0)}
    assert descendants(1, table_) == {2, 3, 4, 5}
    assert descendants(3, table_) == {4}


def _outcome(wall: float, ok: int = 10) -> Outcome:
    return Outcome(Measurement(wall_s=wall, cpu_s=wall / 2, machine_cpu_s=wall,
                               peak_rss_mb=50.0, tree_rss_mb=60.0, returncode=0), ok, 10)


def test_rows_take_the_median_and_the_quick_line_the_ratios() -> None:
    rows = [
        Row.from_outcomes(100, "real", "floor", [_outcome(10), _outcome(12), _outcome(11)]),
        Row.from_outcomes(100, "real", "fleetcheck", [_outcome(12), _outcome(13), _outcome(30)]),
        Row.from_outcomes(100, "trivial", "fleetcheck", [_outcome(2)]),
        Row.from_outcomes(100, "trivial", "ansible", [_outcome(5)]),
    ]
    assert rows[0].wall_s == 11
    assert (rows[1].wall_min_s, rows[1].wall_max_s) == (12, 30)
    assert quick_line(rows, 100) == "fleetcheck/floor=1.18 ansible/fleetcheck=2.50"
    lines = table(rows)
    assert len(lines) == 2 + len(rows)
    assert "| 100 | real | fleetcheck | 13.00 (12.00–30.00) | 1.18 | 1.00 |" in lines[3]


def test_quick_line_without_figures_says_so() -> None:
    assert quick_line([], 100) == "fleetcheck/floor=n/a ansible/fleetcheck=n/a"
