"""The HTML trend chart's geometry: nodes per status per run, and the cpu-fallback line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetcheck.render.matrix import fallback_nodes
from fleetcheck.report.content import NODE_STATUSES, Report, RunSummary

WIDTH, HEIGHT = 560, 150
_LEFT, _RIGHT, _TOP, _BOTTOM = 28, 8, 10, 22
#: Runs shown at most; older ones scroll off the left.
MAX_RUNS = 60


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _runs(report: Report, history: Sequence[RunSummary]) -> list[RunSummary]:
    runs = list(history)
    # The history may or may not already hold this run; show it once, last.
    if not runs or runs[-1].started_at != report.started_at:
        runs.append(RunSummary(report.started_at, report.summary, len(fallback_nodes(report))))
    return runs[-MAX_RUNS:]


def trend_chart(report: Report, history: Sequence[RunSummary]) -> dict[str, Any] | None:
    """Bars (one stacked bar per run) and fallback points in SVG units; None without history."""
    if not history:
        return None
    runs = _runs(report, history)
    totals = [sum(_count(run.summary.get(s)) for s in NODE_STATUSES) for run in runs]
    top = max([*totals, *(_count(run.cpu_fallback) for run in runs), 1])
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(runs)
    bar_w = max(2.0, slot * 0.7)
    bars, points = [], []
    for index, run in enumerate(runs):
        x = _LEFT + index * slot + (slot - bar_w) / 2
        y = float(_TOP + plot_h)
        segments = []
        # Worst statuses at the bottom, where the eye lands first.
        for status in reversed(NODE_STATUSES):
            count = _count(run.summary.get(status))
            if not count:
                continue
            height = plot_h * count / top
            y -= height
            segments.append({"y": round(y, 1), "h": round(height, 1), "status": status,
                             "count": count})
        label = run.started_at[:10]
        counts = ", ".join(f"{seg['count']} {seg['status']}" for seg in reversed(segments))
        bars.append({"x": round(x, 1), "w": round(bar_w, 1), "segments": segments,
                     "title": f"{run.started_at}: {counts or 'no nodes'}; "
                              f"{_count(run.cpu_fallback)} cpu-fallback", "label": label})
        fy = _TOP + plot_h - plot_h * _count(run.cpu_fallback) / top
        points.append((round(x + bar_w / 2, 1), round(fy, 1)))
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "bars": bars,
        "points": " ".join(f"{px},{py}" for px, py in points),
        "dots": points,
        "top": top,
        "top_y": _TOP,
        "base_y": _TOP + plot_h,
        "left": _LEFT,
        "right": WIDTH - _RIGHT,
        "first": bars[0]["label"],
        "last": bars[-1]["label"],
    }
