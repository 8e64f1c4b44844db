"""The launch bench (bench/probe_stdin.py): the shipped probe really runs in each of its three
launches (the bare script on stdin, fleetcheck's packed launch, a file) on this machine (no GPU
stack), and each line says the verdict and the times (the stdin reads left out: strace makes
the bare script's 366,650 reads a minute)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.subprocess


def test_the_shipped_probe_runs_in_each_launch(tmp_path: Path) -> None:
    probe = REPO / "fleetcheck" / "probe" / "probe.py"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "probe_stdin.py"), "--python", sys.executable,
         "--runs", "1", "--no-gpu-stack", "--no-strace", str(probe)],
        env=dict(os.environ, HOME=str(tmp_path), TMPDIR=str(tmp_path), PYTHONPATH=str(REPO)),
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    launches = []
    for line in done.stdout.splitlines()[1:]:
        found = re.fullmatch(r"probe\.py (python -|packed|file): wall [\d.]+ s \([\d.-]+\), "
                             r"CPU [\d.]+ s \([\d.-]+\), verdict no-gpu, stdin reads "
                             r"n/a \(no strace\)", line)
        assert found, done.stdout
        launches.append(found.group(1))
    assert sorted(launches) == ["file", "packed", "python -"]
