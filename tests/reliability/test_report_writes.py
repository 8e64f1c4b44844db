"""Writing reports when the disk is full or the target unwritable: the old file stays whole, no
temporary file is left, the CLI says so in one line and exits 2. Files get safe permissions."""

from __future__ import annotations

import errno
import gzip
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.cli import main
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from fleetcheck.report.reportio import dumps_report, write_atomic
from tests.reliability.support import fill_filesystem as _fill

OLD_REPORT = '{"schema": "fleetcheck.audit/1", "old": true}\n'


def _report(nodes: int = 3, padding: int = 0) -> Report:
    return Report(
        started_at="2026-01-02T03:04:05Z",
        finished_at="2026-01-02T03:04:09Z",
        nodes=tuple(
            NodeResult(
                id=f"pve1/{100 + i}", host="pve1", vmid=100 + i, name=f"ct{i}",
                status="fail" if i % 2 else "ok", reason="x" * padding or "fine",
                triton=TritonVerdict("cpu-fallback" if i % 2 else "gpu", "cuda", None, ""),
                checks=(Check("gpu.visible", "pass", "1 GPU"),),
                facts={"driver": "550.54.15", "blob": "y" * padding},
            )
            for i in range(nodes)
        ),
        inventory="inv.yaml",
    )


def _damage(folder: Path, target: Path, expected: str, allowed: set[str]) -> str | None:
    """What is wrong with the folder after a failed write: None when the old file is whole."""
    if target.read_text() != expected:
        return f"{target}: old content changed"
    extra = sorted(set(os.listdir(folder)) - allowed)
    return f"{folder}: left behind {extra}" if extra else None


def test_write_atomic_bigger_than_the_free_space(tiny_fs: Path, figures: Any) -> None:
    target = tiny_fs / "report.json"
    target.write_text(OLD_REPORT)
    with pytest.raises(OSError) as info:
        write_atomic(target, "z" * 200_000)
    damaged = _damage(tiny_fs, target, OLD_REPORT, {"report.json"})
    figures.report_write(damaged)
    assert info.value.errno == errno.ENOSPC
    assert damaged is None


def test_write_atomic_on_a_full_disk(tiny_fs: Path, figures: Any) -> None:
    target = tiny_fs / "report.json"
    target.write_text(OLD_REPORT)
    _fill(tiny_fs)
    with pytest.raises(OSError) as info:
        write_atomic(target, dumps_report(_report()))
    damaged = _damage(tiny_fs, target, OLD_REPORT, {"report.json", "filler"})
    figures.report_write(damaged)
    assert info.value.errno == errno.ENOSPC
    assert damaged is None


def test_write_atomic_on_a_read_only_filesystem(tiny_fs: Path, figures: Any) -> None:
    target = tiny_fs / "report.json"
    target.write_text(OLD_REPORT)
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True, capture_output=True)
    with pytest.raises(OSError) as info:
        write_atomic(target, dumps_report(_report()))
    damaged = _damage(tiny_fs, target, OLD_REPORT, {"report.json"})
    figures.report_write(damaged)
    assert info.value.errno == errno.EROFS
    assert damaged is None


def test_write_atomic_over_a_directory(tmp_path: Path, figures: Any) -> None:
    target = tmp_path / "report.json"
    target.mkdir()
    with pytest.raises(OSError):
        write_atomic(target, "new")
    leftovers = sorted(set(os.listdir(tmp_path)) - {"report.json"})
    figures.report_write(f"left behind {leftovers}" if leftovers else None)
    assert target.is_dir() and not leftovers


@pytest.mark.parametrize("fmt", ["json", "html", "table", "junit", "prometheus"])
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_cli_report_on_a_full_or_read_only_disk(
    fmt: str, fault: str, tiny_fs: Path, tmp_path: Path, capsys: Any, figures: Any
) -> None:
    saved = tmp_path / "saved.json"
    saved.write_text(dumps_report(_report(nodes=40, padding=2000)))
    target = tiny_fs / f"report.{fmt}"
    target.write_text(OLD_REPORT)
    allowed = {target.name}
    if fault == "full":
        _fill(tiny_fs)
        allowed.add("filler")
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True,
                       capture_output=True)
    code = main(["report", str(saved), "--format", fmt, "-o", str(target)])
    captured = capsys.readouterr()
    damaged = _damage(tiny_fs, target, OLD_REPORT, allowed)
    figures.report_write(damaged)
    assert code == 2
    assert damaged is None
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fleetcheck: error:") and str(target) in lines[0]
    expected = "No space left on device" if fault == "full" else "Read-only file system"
    assert expected in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_cli_report_into_a_missing_folder(tmp_path: Path, capsys: Any, figures: Any) -> None:
    saved = tmp_path / "saved.json"
    saved.write_text(dumps_report(_report()))
    code = main(["report", str(saved), "-o", str(tmp_path / "nope" / "r.json")])
    err = capsys.readouterr().err
    figures.report_write(None if not (tmp_path / "nope").exists() else "created a folder")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "No such file or directory" in err


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022, 0o077])
def test_report_file_is_never_group_or_world_writable(
    umask: int, tmp_path: Path, figures: Any
) -> None:
    saved = tmp_path / "saved.json"
    saved.write_text(dumps_report(_report()))
    target = tmp_path / "out.json"
    old = os.umask(umask)
    try:
        code = main(["report", str(saved), "-o", str(target)])
    finally:
        os.umask(old)
    mode = stat.S_IMODE(target.stat().st_mode)
    figures.report_write(None)
    assert code == 0
    assert not mode & (stat.S_IWGRP | stat.S_IWOTH), oct(mode)
    assert not mode & ~0o644 & 0o777, oct(mode)
    assert not mode & ~(0o777 & ~umask), f"{oct(mode)} ignores umask {oct(umask)}"


def test_history_files_are_private(tmp_path: Path, figures: Any) -> None:
    from fleetcheck.report.history import save_run

    old = os.umask(0o022)
    try:
        path = save_run(tmp_path / "history", _report())
    finally:
        os.umask(old)
    assert gzip.decompress(path.read_bytes())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not stat.S_IMODE(path.parent.stat().st_mode) & 0o077


def test_history_on_a_full_disk_keeps_older_runs(tiny_fs: Path, figures: Any) -> None:
    from fleetcheck.report.history import HistoryError, run_files, save_run

    history = tiny_fs / "history"
    first = save_run(history, _report())
    before = first.read_bytes()
    _fill(tiny_fs)
    with pytest.raises(HistoryError) as info:
        save_run(history, Report("2026-01-03T00:00:00Z", "2026-01-03T00:00:01Z",
                                 _report(nodes=200, padding=500).nodes))
    damaged = None
    if first.read_bytes() != before or run_files(history) != [first]:
        damaged = f"{history}: {os.listdir(history)}"
    leftovers = [n for n in os.listdir(history) if n.endswith(".tmp")]
    damaged = damaged or (f"left {leftovers}" if leftovers else None)
    figures.report_write(damaged)
    assert damaged is None
    assert "\n" not in str(info.value)
