"""Medians of the runs, the ratios, and bench/results.md."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.contenders import Outcome

PROBE_PERFORMANCE = Path(__file__).resolve().parent.parent / "docs" / "probe-performance.md"


@dataclass(frozen=True)
class Row:
    """The median of a contender's runs on one fleet size with one probe."""

    containers: int
    probe: str
    contender: str
    runs: int
    wall_s: float
    wall_min_s: float
    wall_max_s: float
    cpu_s: float
    machine_cpu_s: float
    peak_rss_mb: float
    tree_rss_mb: float
    ok: int
    total: int
    #: Highest 1-minute load average seen at the start of a run.
    load_max: float = 0.0
    note: str = ""

    @classmethod
    def from_outcomes(cls, containers: int, probe: str, contender: str,
                      outcomes: Sequence[Outcome]) -> Row:
        walls = [o.measurement.wall_s for o in outcomes]
        notes = sorted({o.note for o in outcomes if o.note})
        return cls(
            containers=containers, probe=probe, contender=contender, runs=len(outcomes),
            wall_s=statistics.median(walls), wall_min_s=min(walls), wall_max_s=max(walls),
            cpu_s=statistics.median(o.measurement.cpu_s for o in outcomes),
            machine_cpu_s=statistics.median(o.measurement.machine_cpu_s for o in outcomes),
            peak_rss_mb=max(o.measurement.peak_rss_mb for o in outcomes),
            tree_rss_mb=max(o.measurement.tree_rss_mb for o in outcomes),
            ok=min(o.ok for o in outcomes), total=outcomes[0].total,
            load_max=max(o.measurement.load_before for o in outcomes), note="; ".join(notes),
        )

    @property
    def cpu_ms_per_node(self) -> float:
        return 1000 * self.cpu_s / max(self.total, 1)


def _find(rows: Sequence[Row], containers: int, probe: str, contender: str) -> Row | None:
    for row in rows:
        if (row.containers, row.probe, row.contender) == (containers, probe, contender):
            return row
    return None


def ratio(rows: Sequence[Row], containers: int, probe: str, over: str, under: str) -> float | None:
    top, bottom = (_find(rows, containers, probe, over), _find(rows, containers, probe, under))
    if top is None or bottom is None or bottom.wall_s <= 0:
        return None
    return top.wall_s / bottom.wall_s


def quick_line(rows: Sequence[Row], containers: int) -> str:
    """`fleetcheck/floor=X.XX ansible/fleetcheck=Y.YY` (real probe, trivial probe)."""
    x = ratio(rows, containers, "real", "fleetcheck", "floor")
    y = ratio(rows, containers, "trivial", "ansible", "fleetcheck")
    show = lambda value: "n/a" if value is None else f"{value:.2f}"  # noqa: E731
    return f"fleetcheck/floor={show(x)} ansible/fleetcheck={show(y)}"


def table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| containers | probe | contender | wall s (min–max) | × floor | × fleetcheck "
        "| auditor CPU s | CPU ms/node | machine CPU s | peak RSS MB | tree RSS MB | ok "
        "| runs | load |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        floor = ratio(rows, row.containers, row.probe, row.contender, "floor")
        vs_fc = ratio(rows, row.containers, row.probe, row.contender, "fleetcheck")
        spread = f" ({row.wall_min_s:.2f}–{row.wall_max_s:.2f})" if row.runs > 1 else ""
        lines.append(
            f"| {row.containers} | {row.probe} | {row.contender} "
            f"| {row.wall_s:.2f}{spread} "
            f"| {'' if floor is None else f'{floor:.2f}'} "
            f"| {'' if vs_fc is None else f'{vs_fc:.2f}'} "
            f"| {row.cpu_s:.2f} | {row.cpu_ms_per_node:.1f} | {row.machine_cpu_s:.1f} "
            f"| {row.peak_rss_mb:.0f} | {row.tree_rss_mb:.0f} | {row.ok}/{row.total} "
            f"| {row.runs} | {row.load_max:.1f} |"
        )
    return lines


def probe_performance_section() -> list[str]:
    lines = ["## Probe cost on a real GPU", ""]
    if not PROBE_PERFORMANCE.exists():
        lines += ["docs/probe-performance.md does not exist yet: the probe's cost next to a bare",
                  "`import triton` on an H200 is not measured here.", ""]
        return lines
    lines += ["From [docs/probe-performance.md](../docs/probe-performance.md) (measured on an",
              "NVIDIA H200 machine; see that file for the method):", ""]
    return lines


def write_results(path: Path, rows: Sequence[Row], machine: Mapping[str, object],
                  runs: int, extra: Sequence[str] = ()) -> None:
    text = [
        "# fleetcheck benchmarks",
        "",
        f"Measured {machine['date']} on one machine: {machine['cores']} cores ({machine['cpu']}),"
        f" {machine['memory_gb']} GB, Python {machine['python']}, {machine['openssh']},"
        f" {machine['ansible']}. Median of {runs} runs; produced by `python bench/run.py`.",
        "",
        *table(rows),
        "",
        *extra,
        *probe_performance_section(),
    ]
    path.write_text("\n".join(text).rstrip() + "\n")
