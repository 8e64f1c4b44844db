"""Run history: saving with retention, corrupt files, trends, failing-since."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fleetcheck.report.content import Report, RunSummary
from fleetcheck.report.history import (
    HistoryError,
    failing_since,
    history_summaries,
    previous_run,
    run_files,
    save_run,
)
from fleetcheck.report.reportio import load_report
from tests.runs import node, run


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_save_names_runs_by_utc_start_and_keeps_the_report(tmp_path: Path) -> None:
    report = Report("2026-12-01T03:15:00+01:00", "2026-12-01T03:16:00+01:00", (node("pve1"),))
    path = save_run(tmp_path / "runs", report, keep=5)
    assert path == tmp_path / "runs" / "20261201T021500Z.json.gz"
    assert json.loads(gzip.decompress(path.read_bytes()))["schema"] == "fleetcheck.audit/1"
    assert load_report(path) == report


def test_retention_keeps_the_newest_n(tmp_path: Path) -> None:
    for day in range(1, 7):
        save_run(tmp_path, run(day, node("pve1")), keep=3)
    (tmp_path / "notes.txt").write_text("not a run")
    assert names(tmp_path) == [
        "20261204T021500Z.json.gz", "20261205T021500Z.json.gz", "20261206T021500Z.json.gz",
        "notes.txt",
    ]


def test_two_runs_in_one_second_both_kept_in_order(tmp_path: Path) -> None:
    first = save_run(tmp_path, run(1, node("a")), keep=10)
    second = save_run(tmp_path, run(1, node("b")), keep=10)
    assert second.name == "20261201T021500Z-1.json.gz"
    assert run_files(tmp_path) == [first, second]
    assert previous_run(tmp_path) == run(1, node("b"))
    assert previous_run(tmp_path, before=second) == run(1, node("a"))


def test_bad_keep_and_unusable_dir(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"^--keep: must be at least 1, not 0$"):
        save_run(tmp_path, run(1), keep=0)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(HistoryError, match=r"file: cannot create history: "):
        save_run(blocker, run(1), keep=3)


def test_corrupt_runs_are_skipped_with_a_warning(tmp_path: Path) -> None:
    save_run(tmp_path, run(1, node("pve1", "fail")), keep=10)
    good = gzip.compress(b'{"schema": "fleetcheck.audit/1", "nodes": []}' * 20)
    damaged = good[:10] + bytes(b ^ 0x55 for b in good[10:30]) + good[30:]
    (tmp_path / "20261202T021500Z.json.gz").write_bytes(damaged)
    (tmp_path / "20261203T021500Z.json.gz").write_bytes(good[:25])
    (tmp_path / "20261204T021500Z.json.gz").write_bytes(gzip.compress(b'{"schema": "other"}'))
    warnings: list[str] = []
    assert previous_run(tmp_path, warn=warnings.append) == run(1, node("pve1", "fail"))
    folder = str(tmp_path)
    assert warnings == [
        f"skipping history file: {folder}/20261204T021500Z.json.gz: "
        "not a fleetcheck audit report (schema 'fleetcheck.audit/1')",
        f"skipping history file: {folder}/20261203T021500Z.json.gz: "
        "cannot read: Compressed file ended before the end-of-stream marker was reached",
        f"skipping history file: {folder}/20261202T021500Z.json.gz: "
        "cannot read: Error -3 while decompressing data: invalid block type",
    ]
    assert [p.started_at for p in history_summaries(tmp_path, warn=warnings.append)] == [
        "2026-12-01T02:15:00Z"]


def test_empty_or_missing_history(tmp_path: Path) -> None:
    assert previous_run(tmp_path / "none") is None
    assert history_summaries(tmp_path / "none") == []


def test_summaries_oldest_first_limited(tmp_path: Path) -> None:
    for day in range(1, 5):
        save_run(tmp_path, run(day, node("a"), node("b", "fail", "cpu-fallback")), keep=10)
    points = history_summaries(tmp_path, limit=2)
    assert [(p.started_at, p.cpu_fallback, p.summary["fail"], p.summary["ok"]) for p in points] == [
        ("2026-12-03T02:15:00Z", 1, 1, 1), ("2026-12-04T02:15:00Z", 1, 1, 1)]
    assert isinstance(points[0], RunSummary)
    assert points[0].path == str(tmp_path / "20261203T021500Z.json.gz")


def test_failing_since_follows_the_unbroken_streak(tmp_path: Path) -> None:
    save_run(tmp_path, run(1, node("a", "fail"), node("b", "ok"), node("c", "fail")), keep=10)
    save_run(tmp_path, run(2, node("a", "ok"), node("b", "unreachable"), node("c", "fail")),
             keep=10)
    save_run(tmp_path, run(3, node("a", "fail"), node("b", "fail"), node("c", "error")), keep=10)
    today = run(4, node("a", "fail"), node("b", "fail"), node("c", "fail"), node("d", "ok"),
                node("e", "fail"))
    save_run(tmp_path, today, keep=10)
    assert failing_since(tmp_path, today) == {
        "a": "2026-12-03T02:15:00Z",
        "b": "2026-12-02T02:15:00Z",
        "c": "2026-12-01T02:15:00Z",
        "e": "2026-12-04T02:15:00Z",
    }
