"""Rendering an audit report: one module per format, `render()` picks one."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence

from fleetcheck.model import Report, RunSummary

FORMATS = ("table", "html", "json", "junit", "prometheus")


class RenderError(Exception):
    """A report could not be rendered in the format asked for."""


def color_wanted(stream: object = None) -> bool:
    """Colour when writing to a terminal and NO_COLOR (https://no-color.org) is unset or empty."""
    target = sys.stdout if stream is None else stream
    isatty = getattr(target, "isatty", None)
    return bool(callable(isatty) and isatty()) and not os.environ.get("NO_COLOR")


def terminal_width(stream: object = None) -> int | None:
    """The terminal's width when writing to one; None (no limit) for files and pipes."""
    target = sys.stdout if stream is None else stream
    isatty = getattr(target, "isatty", None)
    if not (callable(isatty) and isatty()):
        return None
    return shutil.get_terminal_size(fallback=(100, 24)).columns


def render(
    report: Report,
    fmt: str,
    *,
    width: int | None = None,
    color: bool | None = None,
    history: Sequence[RunSummary] = (),
    failing_since: Mapping[str, str] | None = None,
    changes: Sequence[str] = (),
) -> str:
    """The report as text in `fmt` (one of FORMATS).

    For "table", `color` None means colour on a TTY without NO_COLOR, and `width` None means
    the terminal's width on a TTY and no limit otherwise; `width=0` means no limit (for files).
    `history`, `failing_since` (node id -> since when it fails) and `changes` (one line each)
    come from the run history.
    """
    failing_since = failing_since or {}
    if fmt == "table":
        from fleetcheck.render.terminal import render_terminal

        return render_terminal(
            report,
            width=(width or None) if width is not None else terminal_width(),
            color=color_wanted() if color is None else color,
            failing_since=failing_since,
            changes=changes,
        )
    if fmt == "html":
        from fleetcheck.render.html import render_html

        return render_html(report, history=history, failing_since=failing_since, changes=changes)
    if fmt == "json":
        from fleetcheck.render.json import render_json

        return render_json(report)
    if fmt == "junit":
        from fleetcheck.render.junit import render_junit

        return render_junit(report)
    if fmt == "prometheus":
        from fleetcheck.render.prometheus import render_prometheus

        return render_prometheus(report)
    raise RenderError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
