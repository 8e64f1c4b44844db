"""Run history: audits kept as gzipped JSON with bounded retention, and reading them back.

What changed between two runs is `rundiff.py`'s; running the --on-change hook is
`integrations/hook.py`'s.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.statuses import FAILING_STATUSES
from fleetcheck.report.content import Report, RunSummary
from fleetcheck.report.reportio import ReportFileError, dumps_report, load_report, write_atomic
from fleetcheck.timestamps import parse_time

#: Runs kept by default (`--keep`).
DEFAULT_KEEP = 90

#: A run's file: its start time in UTC, and a sequence number when two runs share a second.
_RUN_NAME = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?\.json\.gz$")

#: Statuses counted as "failing" for "failing since": the node is not usable as it is.

Warn = Callable[[str], None]


class HistoryError(FleetcheckError):
    """The history directory cannot be used (not a directory, not writable, bad --keep)."""


def _stderr_warning(message: str) -> None:
    print(f"fleetcheck: warning: {message}", file=sys.stderr)


def _stamp(report: Report) -> str:
    moment = parse_time(report.started_at.strip()) or datetime.now(timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The run files in a history directory, oldest first; other files are not ours."""
    folder = Path(directory)
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HistoryError(f"{directory}: cannot read history: {exc.strerror or exc}") from None
    runs = []
    for entry in entries:
        match = _RUN_NAME.match(entry.name)
        if match and entry.is_file():
            runs.append(((match.group(1), int(match.group(2) or 0)), entry))
    return [path for _, path in sorted(runs)]


def save_run(directory: str | os.PathLike[str], report: Report, keep: int = DEFAULT_KEEP) -> Path:
    """Keep this run (gzipped audit JSON, written atomically); remove all but the newest `keep`."""
    if keep < 1:
        raise HistoryError(f"--keep: must be at least 1, not {keep}")
    folder = Path(directory)
    try:
        # Runs name every host and its weak spots: private to the auditing user.
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryError(f"{directory}: cannot create history: {exc.strerror or exc}") from None
    stamp = _stamp(report)
    target = folder / f"{stamp}.json.gz"
    sequence = 0
    while target.exists():
        sequence += 1
        target = folder / f"{stamp}-{sequence}.json.gz"
    # mtime=0: the same report always gives the same bytes.
    payload = gzip.compress(dumps_report(report).encode("utf-8", "replace"), mtime=0)
    try:
        write_atomic(target, payload, mode=0o600)
    except OSError as exc:
        raise HistoryError(f"{target}: cannot write: {exc.strerror or exc}") from None
    for old in run_files(folder)[:-keep]:
        try:
            old.unlink()
        except FileNotFoundError:
            pass  # another run's retention got there first
        except OSError as exc:
            raise HistoryError(f"{old}: cannot remove old run: {exc.strerror or exc}") from None
    return target


def _runs_newest_first(
    directory: str | os.PathLike[str], warn: Warn, before: Path | None = None,
) -> Iterator[tuple[Path, Report]]:
    """Readable runs, newest first; a corrupt file is skipped with a warning."""
    files = run_files(directory)
    if before is not None:
        names = [path.name for path in files]
        cut = names.index(before.name) if before.name in names else len(files)
        files = files[:cut]
    for path in reversed(files):
        try:
            report = load_report(path)
        except ReportFileError as exc:
            warn(f"skipping history file: {exc}")
            continue
        yield path, report


def previous_run(
    directory: str | os.PathLike[str], before: Path | None = None, warn: Warn = _stderr_warning,
) -> Report | None:
    """The newest readable run (older than the run file `before`, when given), or None."""
    for _, report in _runs_newest_first(directory, warn, before):
        return report
    return None


def history_summaries(
    directory: str | os.PathLike[str], limit: int = 30, warn: Warn = _stderr_warning,
) -> list[RunSummary]:
    """The last `limit` readable runs as trend points, oldest first."""
    points: list[RunSummary] = []
    for path, report in _runs_newest_first(directory, warn):
        if len(points) >= limit:
            break
        cpu = sum(1 for node in report.nodes if node.triton.verdict == "cpu-fallback")
        points.append(RunSummary(report.started_at, report.summary, cpu, str(path)))
    return points[::-1]


def failing_since(
    directory: str | os.PathLike[str], report: Report, warn: Warn = _stderr_warning,
) -> dict[str, str]:
    """For each failing node of `report`, the start of the first run of its unbroken streak.

    Failing means fail, error or unreachable. Runs at or after `report` in the directory
    (the report itself, once saved) are not looked at; a run without the node, or with the
    node healthy, ends the streak.
    """
    current = parse_time(report.started_at.strip())
    since = {node.id: report.started_at for node in report.nodes
             if node.status in FAILING_STATUSES}
    open_streaks = set(since)
    for _, older in _runs_newest_first(directory, warn):
        if not open_streaks:
            break
        moment = parse_time(older.started_at.strip())
        if older.started_at == report.started_at or (current and moment and moment >= current):
            continue
        statuses = {node.id: node.status for node in older.nodes}
        for node_id in list(open_streaks):
            if statuses.get(node_id) in FAILING_STATUSES:
                since[node_id] = older.started_at
            else:
                open_streaks.discard(node_id)
    return since
