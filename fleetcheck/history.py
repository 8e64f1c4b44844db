"""Run history: audits kept as gzipped JSON with bounded retention; what changed between runs."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fleetcheck.consistency import fact_label, fact_value
from fleetcheck.model import NodeResult, Report, RunSummary
from fleetcheck.render.sanitize import sanitise
from fleetcheck.reportio import ReportFileError, dumps_report, load_report, write_atomic
from fleetcheck.timestamps import parse_time
from fleetcheck.verdict import CONSISTENCY_KEYS, FAILING_STATUSES, HEALTHY_STATUSES

#: Runs kept by default (`--keep`).
DEFAULT_KEEP = 90

#: A run's file: its start time in UTC, and a sequence number when two runs share a second.
_RUN_NAME = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?\.json\.gz$")

#: Statuses counted as "failing" for "failing since": the node is not usable as it is.

Warn = Callable[[str], None]


class HistoryError(Exception):
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


@dataclass(frozen=True)
class Change:
    """One difference between two runs, about a node (or "fleet" for a fleet finding)."""

    kind: str
    node: str
    old: str | None = None
    new: str | None = None
    detail: str = ""


#: Change kinds, in the order the text shows them.
CHANGE_KINDS = (
    "new-failure", "recovered", "status", "verdict", "version", "appeared", "gone", "fleet",
)

_TITLES = {
    "new-failure": "new failure", "recovered": "recovered", "status": "status",
    "verdict": "Triton verdict", "version": "version", "appeared": "new node",
    "gone": "node gone", "fleet": "fleet",
}


@dataclass(frozen=True)
class ReportDiff:
    """What changed from one run to the next."""

    old_started_at: str
    new_started_at: str
    changes: tuple[Change, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def lines(self) -> list[str]:
        """The diff as text, one line per change, printable characters only."""
        span = f"from {self.old_started_at or '?'} to {self.new_started_at or '?'}"
        if not self.changes:
            return [f"no changes {span}"]
        return [f"{len(self.changes)} change(s) {span}:"] + [_change_line(c) for c in self.changes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "fleetcheck.diff/1",
            "old_started_at": self.old_started_at,
            "new_started_at": self.new_started_at,
            "changed": self.changed,
            "changes": [
                {"kind": c.kind, "node": c.node, "old": c.old, "new": c.new, "detail": c.detail}
                for c in self.changes
            ],
        }


def _change_line(change: Change) -> str:
    title = _TITLES.get(change.kind, change.kind)
    node = sanitise(change.node, 120)
    old, new = sanitise(change.old or "-", 120), sanitise(change.new or "-", 120)
    detail = sanitise(change.detail)
    if change.kind == "appeared":
        text = f"{node} ({new})"
    elif change.kind == "gone":
        text = f"{node} (was {old})"
    elif change.kind == "version":
        text = f"{node}: {detail} {old} -> {new}"
        detail = ""
    else:
        text = f"{node}: {old} -> {new}"
    return f"  {title}: {text}" + (f": {detail}" if detail else "")


def _node_changes(old: NodeResult, new: NodeResult) -> list[Change]:
    changes = []
    if old.status != new.status:
        if new.status == "fail":
            kind = "new-failure"
        elif old.status in FAILING_STATUSES and new.status in HEALTHY_STATUSES:
            kind = "recovered"
        else:
            kind = "status"
        changes.append(Change(kind, new.id, old.status, new.status,
                              new.reason if kind != "recovered" else ""))
    if old.triton.verdict != new.triton.verdict:
        changes.append(Change("verdict", new.id, old.triton.verdict, new.triton.verdict,
                              new.triton.cause or ""))
    for key in CONSISTENCY_KEYS:
        before, after = fact_value(old.facts, key), fact_value(new.facts, key)
        # A fact only one run has (node unreachable, probe cut short) is not drift.
        if before is not None and after is not None and before != after:
            changes.append(Change("version", new.id, before, after, fact_label(key)))
    return changes


def diff_reports(old: Report, new: Report) -> ReportDiff:
    """What changed from `old` to `new`: per node, the fleet findings, nodes come and gone."""
    changes: list[Change] = []
    old_nodes = {node.id: node for node in old.nodes}
    new_nodes = {node.id: node for node in new.nodes}
    for node_id, node in new_nodes.items():
        if node_id in old_nodes:
            changes.extend(_node_changes(old_nodes[node_id], node))
        else:
            changes.append(Change("appeared", node_id, None, node.status, ""))
    for node_id, node in old_nodes.items():
        if node_id not in new_nodes:
            changes.append(Change("gone", node_id, node.status, None, ""))
    old_fleet = {check.id: check for check in old.fleet_checks}
    new_fleet = {check.id: check for check in new.fleet_checks}
    for check_id in sorted(set(old_fleet) | set(new_fleet)):
        before, after = old_fleet.get(check_id), new_fleet.get(check_id)
        was = before.status if before else "pass"
        now = after.status if after else "pass"
        if was != now:
            changes.append(Change("fleet", check_id, was, now, after.summary if after else ""))
    rank = {kind: index for index, kind in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda change: (rank.get(change.kind, len(rank)), change.node))
    return ReportDiff(old.started_at, new.started_at, tuple(changes))


def run_on_change(cmd: str, diff_text: str, timeout: float = 60) -> str | None:
    """Run `cmd` (split like a shell would, but run without one) with the diff on stdin.

    Returns None when it succeeded, else one line saying what went wrong. The line names the
    program only, never its arguments: a webhook URL with a token is a common argument.
    """
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    if not argv:
        return "empty command"
    program = argv[0]
    try:
        # Its own session, so a timeout kills what it started too; its stdout is not ours
        # (ours may be the report itself).
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return f"{program}: command not found"
    except PermissionError:
        return f"{program}: permission denied"
    except OSError as exc:
        return f"{program}: cannot run: {exc.strerror or exc}"
    try:
        _, stderr = proc.communicate(diff_text.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"{program}: timed out after {timeout:g} s"
    if proc.returncode != 0:
        said = stderr.decode("utf-8", "replace").strip().splitlines()
        last = said[-1] if said else ""
        for secret in argv[1:]:
            if len(secret) >= 4:
                last = last.replace(secret, "…")
        status = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                  else f"exited with status {proc.returncode}")
        return f"{program}: {status}" + (f": {sanitise(last, 200)}" if last else "")
    return None
