"""The workload-path helpers of the stack script, run as functions (probe/parts/scripts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetcheck.probe.parts.scripts import workload


def test_a_dir_another_process_makes_meanwhile_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two probes (or a job and a probe) sharing one home both find ~/.triton missing; the
    # other one creates it first. Triton's os.makedirs(exist_ok=True) goes on: so must the
    # probe, or its own path fails with FileExistsError and the node reads cpu-fallback.
    home = tmp_path / "home"
    home.mkdir()
    target = home / ".triton" / "cache" / ".fleetcheck-probe-1"
    real_mkdir = os.mkdir

    def racing_mkdir(path: str, *args: int) -> None:
        if path == str(home / ".triton"):
            real_mkdir(path)  # the other process wins the race
        real_mkdir(path, *args)

    monkeypatch.setattr(workload._os, "mkdir", racing_mkdir)
    made: list[str] = []
    workload.make_dirs(str(target), made)
    assert target.is_dir()
    # Only what this probe created is its own to remove afterwards.
    assert made == [str(home / ".triton" / "cache"), str(target)]


def test_a_file_in_the_way_is_still_the_error_triton_meets(tmp_path: Path) -> None:
    (tmp_path / ".triton").write_text("not a directory")
    made: list[str] = []
    with pytest.raises(NotADirectoryError):
        workload.make_dirs(str(tmp_path / ".triton" / "cache"), made)
    assert made == []
