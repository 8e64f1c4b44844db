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


def test_a_parent_another_probe_removes_meanwhile_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two probes sharing one home: this one finds ~/.triton/cache made by the other, which
    # then removes it (its own clean-up of the dirs it made, empty again) before this one
    # makes its subdir there. The walk is made again, as a second os.makedirs would.
    cache = tmp_path / ".triton" / "cache"
    cache.mkdir(parents=True)
    target = cache / ".fleetcheck-probe-2"
    real_mkdir = os.mkdir
    removed: list[str] = []

    def mkdir_after_the_other_cleaned(path: str, *args: int) -> None:
        if path == str(target) and not removed:
            os.rmdir(cache)
            os.rmdir(cache.parent)
            removed.append(path)
        real_mkdir(path, *args)

    monkeypatch.setattr(workload._os, "mkdir", mkdir_after_the_other_cleaned)
    made: list[str] = []
    workload.make_dirs(str(target), made)
    assert target.is_dir()
    assert made == [str(cache.parent), str(cache), str(target)]


def test_a_parent_that_keeps_vanishing_is_the_error_after_a_few_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(path: str, *args: int) -> None:
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(workload._os, "mkdir", never)
    with pytest.raises(FileNotFoundError):
        workload.make_dirs(str(tmp_path / "a" / "b"), [])
